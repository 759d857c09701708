set -u
tar -xzf .gpuz/bundle.tgz
export NCCL_NVLS_ENABLE=0; unset WEFT_NVLS
export WEFT_REQUIRE=nvlink
mkdir -p $OUT/m
timeout 120 .gpu/weft.test -test.run 'TestP2PNVLink|TestP2PRegisteredNVLink|TestP2PRegisteredGraphNVLink' -test.count 1 -test.v > $OUT/m/tests.log 2>&1
echo "tests rc=$? $(grep -c -- '--- PASS' $OUT/m/tests.log) passed $(grep -- '--- FAIL' $OUT/m/tests.log)"
CB=examples/cbench/cbench
make -C examples/cbench CFLAGS='-O2 -Wall' >/dev/null 2>&1
PA=(-g 2 -t gather,scatter,sendrecv -b 1M -e 64M -f 2 -w 5 -n 30 -G 10 -c 1 -p 0)
env -u LD_PRELOAD NCCL_DEBUG=WARN timeout 60 $CB "${PA[@]}" > $OUT/m/nccl.log 2>&1
for sh in new-1 t1024-1 new-2 t1024-2; do
  v=; case $sh in t1024*) v=32x1024w2Md8p1;; esac
  env LD_PRELOAD=$PWD/.gpu/libweft_nccl.so WEFT_NCCL_FALLBACK=0 WEFT_DEBUG=WARN WEFT_P2P_MID_SHAPE="$v" timeout 60 $CB "${PA[@]}" > $OUT/m/$sh.log 2>&1
  echo "$sh rc=$? $(tail -1 $OUT/m/$sh.log)"
done
env LD_PRELOAD=$PWD/.gpu/libweft_nccl.so WEFT_NCCL_FALLBACK=0 WEFT_DEBUG=WARN timeout 60 $CB "${PA[@]}" -R 1 > $OUT/m/new-reg.log 2>&1; echo "reg rc=$? $(tail -1 $OUT/m/new-reg.log)"
env -u LD_PRELOAD NCCL_DEBUG=WARN timeout 60 $CB "${PA[@]}" -R 1 > $OUT/m/nccl-reg.log 2>&1
tar -czf $OUT/m.tgz -C $OUT m && rm -rf $OUT/m
