set -u
tar -xzf .gpuz/bundle.tgz
gunzip -kf .gpuz/old/weft.gz .gpuz/old/weft.test.gz; chmod +x .gpuz/old/weft .gpuz/old/weft.test
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1; unset WEFT_NVLS
T0=$(date +%s)
D=$OUT/c; mkdir -p $D
t() { echo "$(( $(date +%s)-T0 ))s"; }
WEFT_REQUIRE=nvlink timeout 90 .gpu/hal_nvlink.test -test.count=1 > $D/test-nvlink.log 2>&1; echo "nvlink rc=$? $(tail -1 $D/test-nvlink.log) $(t)"
WEFT_REQUIRE=nvlink timeout 60 .gpu/internal_cudadev.test -test.count=1 > $D/test-cudadev.log 2>&1; echo "cudadev rc=$? $(tail -1 $D/test-cudadev.log) $(t)"
WEFT_REQUIRE=nvlink timeout 150 .gpu/weft.test -test.count=1 -test.v -test.run 'TestCollectivesPortNVLink|TestCEAllGatherNVLink' > $D/test-root.log 2>&1; echo "root rc=$? $(grep -c -- '--- PASS' $D/test-root.log) pass $(grep -c -- '--- FAIL' $D/test-root.log) fail $(t)"
for i in 1 2; do
  for b in new old; do
    bin=.gpu/weft.test; [ $b = old ] && bin=.gpuz/old/weft.test
    WEFT_BENCH_HAL=nvlink timeout 40 $bin -test.run '^$' -test.bench PortLatency -test.benchtime 3x > $D/lat-$b-$i.log 2>&1
    echo "lat $b $i rc=$? $(grep -E 'us/one' $D/lat-$b-$i.log | tr -s ' ' | head -3 | paste -sd' ') $(t)"
  done
done
export NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_NET=Socket NCCL_SOCKET_IFNAME=lo WEFT_SOCKET_IFNAME=lo
one() { # name bin net coll env...
  local name=$1 bin=$2 n=$3 c=$4; shift 4
  mkdir -p $D/$name-$c
  env WEFT_NET=$n WEFT_PROXY_TRACE=$D/$name-$c "$@" timeout 40 $bin run --nproc 2 --nodes 2 -- $bin bench $c -b 64 -e 4K -f 64 -w 20 -n 300 -d float --hal nvlink --baseline nccl -J $D/$name-$c.json > $D/$name-$c.log 2>&1
  echo "$name $c rc=$? $(t)"
}
for i in 1 2; do
  for c in all_gather broadcast sendrecv all_reduce; do
    for n in socket ucx; do
      one $n-new-$i .gpu/weft $n $c
      one $n-old-$i .gpuz/old/weft $n $c
    done
  done
done
for c in all_gather sendrecv; do one socket-spin .gpu/weft socket $c WEFT_SOCKET_SPIN_US=50; done
tar -czf $OUT/c.tgz -C $OUT c && rm -rf $D
