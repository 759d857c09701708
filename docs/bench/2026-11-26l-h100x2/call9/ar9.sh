# Call 9: bfloat16 AllReduce 256 MB - 1 GB through the C ABI (cbench, CUDA
# graphs, out of place) beside NCCL: the default large tier against other
# 2PA shapes named with WEFT_ALLREDUCE (one tier for every size here).
set -u
tar -xzf .gpuz/bundle.tgz
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1; unset WEFT_NVLS
CB=examples/cbench/cbench
make -B -C examples/cbench CFLAGS='-O2 -Wall' >/dev/null 2>&1 || make -B -C examples/cbench CFLAGS='-O2 -Wall' OMP= >/dev/null
ARGS=(-g 2 -t allreduce -d bfloat16 -b 256M -e 1G -f 2 -w 5 -n 30 -G 10 -c 1 -p 0)
T0=$(date +%s)
run() { # name env...
  local name=$1; shift
  echo "== $name $(( $(date +%s)-T0 ))s"
  timeout 60 env "$@" $CB "${ARGS[@]}" 2>&1 | grep -E "^ +[0-9]|wrong" | tee -a $OUT/$name.log
}
W=(LD_PRELOAD=$PWD/.gpu/libweft_nccl.so WEFT_NCCL_FALLBACK=0 WEFT_DEBUG=WARN)
for r in 1 2; do
  run nccl$r NCCL_DEBUG=WARN
  run weft-default$r "${W[@]}"
  run weft-128x512-u4-$r "${W[@]}" WEFT_ALLREDUCE=2pa-128x512-u4
  run weft-132x512-u2-$r "${W[@]}" WEFT_ALLREDUCE=2pa-132x512-u2
  run weft-64x1024-u2-$r "${W[@]}" WEFT_ALLREDUCE=2pa-64x1024-u2
  run weft-push-w8M-$r "${W[@]}" WEFT_ALLREDUCE=2pa-push-128x512-u2-w8M
done
echo "done $(( $(date +%s)-T0 ))s"
