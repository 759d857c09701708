set -u
tar -xzf .gpuz/bundle.tgz
export NCCL_NVLS_ENABLE=0; unset WEFT_NVLS
T0=$(date +%s)
mkdir -p $OUT/m
CB=examples/cbench/cbench
make -C examples/cbench CFLAGS='-O2 -Wall' >/dev/null 2>&1
PA=(-g 2 -t gather,scatter,sendrecv -b 32M -e 512M -f 2 -w 5 -n 20 -G 10 -c 1 -p 0)
W=(env LD_PRELOAD=$PWD/.gpu/libweft_nccl.so WEFT_NCCL_FALLBACK=0 WEFT_DEBUG=WARN)
for reg in 1 0; do
  env -u LD_PRELOAD NCCL_DEBUG=WARN timeout 60 $CB "${PA[@]}" -R $reg > $OUT/m/nccl-r$reg.log 2>&1; echo "nccl r$reg rc=$? $(( $(date +%s)-T0 ))s"
  for v in def mid s32 t512 s32t512; do
    case $v in
      def) e=();; mid) e=(WEFT_P2P_MID_MAX_BYTES=1G);; s32) e=(WEFT_P2P_SHAPE=32x1024w16M);;
      t512) e=(WEFT_P2P_SHAPE=44x512w16M);; s32t512) e=(WEFT_P2P_SHAPE=32x512w16M);;
    esac
    "${W[@]}" "${e[@]}" timeout 60 $CB "${PA[@]}" -R $reg > $OUT/m/$v-r$reg.log 2>&1
    echo "$v r$reg rc=$? $(( $(date +%s)-T0 ))s $(tail -1 $OUT/m/$v-r$reg.log)"
  done
  env -u LD_PRELOAD NCCL_DEBUG=WARN timeout 60 $CB "${PA[@]}" -R $reg > $OUT/m/nccl2-r$reg.log 2>&1; echo "nccl2 r$reg rc=$?"
done
tar -czf $OUT/m.tgz -C $OUT m && rm -rf $OUT/m
