# Call 1: releases without the endpoint flush (hal.AckSignaler) over UCX,
# old (bdf863c) and new build alternated, beside NCCL's sockets; and the
# transports' CPU floors on this host (Go benchmarks, no GPU).
set -u
tar -xzf .gpuz/bundle.tgz
gunzip -c .gpuz/old/weft.gz > /tmp/oldweft && chmod +x /tmp/oldweft
gunzip -c .gpuz/ucx.test.gz > /tmp/ucx.test && chmod +x /tmp/ucx.test
gunzip -c .gpuz/socket.test.gz > /tmp/socket.test && chmod +x /tmp/socket.test
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1; unset WEFT_NVLS
export NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_NET=Socket NCCL_SOCKET_IFNAME=lo WEFT_SOCKET_IFNAME=lo
if ! ldconfig -p | grep -q 'libucp.so.0 '; then export LD_LIBRARY_PATH=$PWD/.gpu/ucx UCX_MODULE_DIR=$PWD/.gpu/ucx/ucx; echo "carried UCX"; fi
T0=$(date +%s)
D=$OUT/p; mkdir -p $D
echo "== CPU floors"
( cd /tmp && WEFT_REQUIRE=ucx timeout 60 ./ucx.test -test.run '^$' -test.bench 'BenchmarkUCXPingPong/tcp|BenchmarkUCXPut/tcp' -test.benchtime 2000x 2>&1 | grep -v "no peer failure" | grep "Benchmark\|FAIL" ) > $D/cpu.txt
( cd /tmp && timeout 60 ./socket.test -test.run '^$' -test.bench 'BenchmarkSocketPingPong|BenchmarkSocketPut' -test.benchtime 1000x 2>&1 | grep "Benchmark\|FAIL" ) >> $D/cpu.txt
cat $D/cpu.txt; echo "floors $(( $(date +%s)-T0 ))s"
one() { # name bin net coll from to iters
  local name=$1 bin=$2 n=$3 c=$4 b=$5 e=$6 it=$7
  [ $(( $(date +%s)-T0 )) -gt 420 ] && { echo "skip $name $c $b"; return; }
  env WEFT_NET=$n timeout 60 $bin run --nproc 2 --nodes 2 -- $bin bench $c -b $b -e $e -f 16 -w $(( it/8+1 )) -n $it -d float --hal nvlink --baseline nccl -J $D/$name-$c-$b.json > $D/$name-$c-$b.log 2>&1
  echo "$name $c $b rc=$? $(( $(date +%s)-T0 ))s"
}
for c in sendrecv all_gather broadcast reduce_scatter; do
  for b in old new; do
    bin=.gpu/weft; [ $b = old ] && bin=/tmp/oldweft
    one ucx-$b $bin ucx $c 64 16K 200
    one ucx-$b $bin ucx $c 256K 64M 8
  done
done
python3 .gpuz/netsum.py $D > $OUT/sum.txt 2>&1; cat $OUT/sum.txt
tar -czf $OUT/p.tgz -C $OUT p && rm -rf $D
