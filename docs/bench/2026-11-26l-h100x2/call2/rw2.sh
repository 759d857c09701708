# Call 2: hal/ucx with a sending and a receiving worker (two threads),
# against the parent build (6c15347: one worker), alternated, beside
# NCCL's sockets; the CPU benchmarks of both builds on this host.
set -u
tar -xzf .gpuz/bundle.tgz
gunzip -c .gpuz/old/weft.gz > /tmp/oldweft && chmod +x /tmp/oldweft
gunzip -c .gpuz/old/ucx.test.gz > /tmp/ucx_old.test && chmod +x /tmp/ucx_old.test
gunzip -c .gpuz/ucx.test.gz > /tmp/ucx_new.test && chmod +x /tmp/ucx_new.test
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1; unset WEFT_NVLS
export NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_NET=Socket NCCL_SOCKET_IFNAME=lo WEFT_SOCKET_IFNAME=lo
if ! ldconfig -p | grep -q 'libucp.so.0 '; then export LD_LIBRARY_PATH=$PWD/.gpu/ucx UCX_MODULE_DIR=$PWD/.gpu/ucx/ucx; echo "carried UCX"; fi
T0=$(date +%s)
D=$OUT/p; mkdir -p $D
echo "== CPU"
for b in old new old new; do
  echo "-- $b"
  ( cd /tmp && WEFT_REQUIRE=ucx timeout 40 ./ucx_$b.test -test.run '^$' -test.bench 'BenchmarkUCXPingPong/tcp|BenchmarkUCXPut/tcp/staging0' -test.benchtime 500x 2>&1 | grep -v "no peer failure" | grep "Benchmark\|FAIL" )
done > $D/cpu.txt 2>&1
cat $D/cpu.txt; echo "cpu $(( $(date +%s)-T0 ))s"
one() { # name bin net coll from to iters
  local name=$1 bin=$2 n=$3 c=$4 b=$5 e=$6 it=$7
  [ $(( $(date +%s)-T0 )) -gt 430 ] && { echo "skip $name $c $b"; return; }
  env WEFT_NET=$n timeout 60 $bin run --nproc 2 --nodes 2 -- $bin bench $c -b $b -e $e -f 16 -w $(( it/8+1 )) -n $it -d float --hal nvlink --baseline nccl -J $D/$name-$c-$b.json > $D/$name-$c-$b.log 2>&1
  echo "$name $c $b rc=$? $(( $(date +%s)-T0 ))s"
}
for c in all_gather sendrecv broadcast all_reduce reduce_scatter alltoall reduce; do
  for b in old new; do
    bin=.gpu/weft; [ $b = old ] && bin=/tmp/oldweft
    one ucx-$b $bin ucx $c 64 16K 200
    one ucx-$b $bin ucx $c 256K 64M 10
  done
done
python3 .gpuz/netsum.py $D > $OUT/sum.txt 2>&1; cat $OUT/sum.txt
tar -czf $OUT/p.tgz -C $OUT p && rm -rf $D
