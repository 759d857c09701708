set -u
tar -xzf .gpuz/bundle.tgz
export NCCL_NVLS_ENABLE=0; unset WEFT_NVLS
export WEFT_REQUIRE=nvlink
CB=examples/cbench/cbench
make -C examples/cbench CFLAGS='-O2 -Wall' >/dev/null 2>&1
mkdir -p $OUT/l
PA=(-g 2 -t gather,scatter,sendrecv -b 32M -e 512M -f 2 -w 3 -n 10 -G 5 -c 1 -p 0)
env -u LD_PRELOAD NCCL_DEBUG=WARN timeout 60 $CB "${PA[@]}" > $OUT/l/nccl.log 2>&1
for sh in default 44x512 32x512 44x512w8Md4 32x1024 default2; do
  v=$sh; case $sh in default*) v=;; esac
  env LD_PRELOAD=$PWD/.gpu/libweft_nccl.so WEFT_NCCL_FALLBACK=0 WEFT_DEBUG=WARN WEFT_P2P_SHAPE="$v" timeout 60 $CB "${PA[@]}" > $OUT/l/$sh.log 2>&1
  echo "$sh rc=$? $(tail -1 $OUT/l/$sh.log)"
done
tar -czf $OUT/l.tgz -C $OUT l && rm -rf $OUT/l
