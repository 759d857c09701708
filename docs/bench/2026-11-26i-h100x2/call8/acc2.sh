set -u
tar -xzf .gpuz/bundle.tgz
export NCCL_NVLS_ENABLE=0; unset WEFT_NVLS
export WEFT_REQUIRE=nvlink
R=$PWD
mkdir -p $OUT/r
timeout 150 .gpu/weft.test -test.count=1 -test.v -test.run 'TestCollectivesPortNVLink' > $OUT/r/port-test.log 2>&1
echo "port test rc=$? $(grep -E -- '^--- ' $OUT/r/port-test.log)"
CB=examples/cbench/cbench
make -C examples/cbench CFLAGS='-O2 -Wall' >/dev/null 2>&1
A=(-g 2 -t sendrecv,gather,scatter -b 8 -e 4K -f 8 -w 5 -n 500 -G 0 -H 1 -c 0)
run() { name=$1; shift; timeout 60 "$@" >$OUT/r/$name.log 2>&1; echo "$name rc=$? $(tail -1 $OUT/r/$name.log)"; }
run nccl-1 env -u LD_PRELOAD NCCL_DEBUG=WARN $CB "${A[@]}"
for i in 1 2; do
  run new-$i env WEFT_NCCL_FALLBACK=0 WEFT_DEBUG=WARN LD_PRELOAD=$R/.gpu/libweft_nccl.so $CB "${A[@]}"
  run old-$i env WEFT_NCCL_FALLBACK=0 WEFT_DEBUG=WARN LD_PRELOAD=$R/.gpuz/old/libweft_nccl.so $CB "${A[@]}"
done
run nccl-2 env -u LD_PRELOAD NCCL_DEBUG=WARN $CB "${A[@]}"
tar -czf $OUT/r.tgz -C $OUT r && rm -rf $OUT/r
