# Call 11: the large AllReduce tier with 2 or 4 16-byte vectors per thread
# (2pa-128x512-u2, the default, against 2pa-128x512-u4), float and
# bfloat16, 16 MB - 1 GB through the C ABI (cbench, CUDA graphs), each
# twice, alternated, beside NCCL.
set -u
tar -xzf .gpuz/bundle.tgz
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1; unset WEFT_NVLS
CB=examples/cbench/cbench
make -B -C examples/cbench CFLAGS='-O2 -Wall' >/dev/null 2>&1 || make -B -C examples/cbench CFLAGS='-O2 -Wall' OMP= >/dev/null
T0=$(date +%s)
W=(LD_PRELOAD=$PWD/.gpu/libweft_nccl.so WEFT_NCCL_FALLBACK=0 WEFT_DEBUG=WARN)
for d in float bfloat16; do
  ARGS=(-g 2 -t allreduce -d $d -b 16M -e 1G -f 4 -w 5 -n 30 -G 10 -c 1 -p 0)
  for r in 1 2; do
    for v in nccl u2 u4; do
      [ $(( $(date +%s)-T0 )) -gt 200 ] && break
      case $v in
        nccl) E=(NCCL_DEBUG=WARN) ;;
        u2) E=("${W[@]}" WEFT_ALLREDUCE=2pa-128x512-u2) ;;
        u4) E=("${W[@]}" WEFT_ALLREDUCE=2pa-128x512-u4) ;;
      esac
      echo "== $d $v $r $(( $(date +%s)-T0 ))s"
      timeout 60 env "${E[@]}" $CB "${ARGS[@]}" 2>&1 | grep -E "^ +[0-9]" | awk '{print $1, $6}'
    done
  done
done 2>&1 | tee $OUT/u4.txt
