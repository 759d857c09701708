set -u
tar -xzf .gpuz/bundle.tgz
export NCCL_NVLS_ENABLE=0; unset WEFT_NVLS
export WEFT_REQUIRE=nvlink
CB=examples/cbench/cbench
make -C examples/cbench CFLAGS='-O2 -Wall' >/dev/null 2>&1
mkdir -p $OUT/m
PA=(-g 2 -t gather,scatter,sendrecv -b 2M -e 32M -f 2 -w 5 -n 30 -G 10 -c 1 -p 0)
env -u LD_PRELOAD NCCL_DEBUG=WARN timeout 60 $CB "${PA[@]}" > $OUT/m/nccl.log 2>&1
for sh in default 32x512w2Md8p1 32x256w2Md8p1 40x512w2Md8p1 24x512w2Md8p1 48x512w2Md8p1 32x512w1Md16p1 32x512w2Md8p1-b default2; do
  v=${sh%-b}; case $sh in default*) v=;; esac
  env LD_PRELOAD=$PWD/.gpu/libweft_nccl.so WEFT_NCCL_FALLBACK=0 WEFT_DEBUG=WARN WEFT_P2P_MID_SHAPE="$v" timeout 60 $CB "${PA[@]}" > $OUT/m/$sh.log 2>&1
  echo "$sh rc=$? $(tail -1 $OUT/m/$sh.log)"
done
env -u LD_PRELOAD NCCL_DEBUG=WARN timeout 60 $CB "${PA[@]}" > $OUT/m/nccl2.log 2>&1
tar -czf $OUT/m.tgz -C $OUT m && rm -rf $OUT/m
