#!/usr/bin/env bash
# Call 10 (2026-11-27, 2×H100): AllReduce at 256 MB – 1 GB through the C ABI (examples/cbench,
# CUDA graphs, out of place), weft and NCCL alternated three times, float and bfloat16 — the
# spread behind the acceptance's single 1 GB bf16 figure (1.025×).
set -u
tar -xzf .gpuz/bundle.tgz
export NCCL_NVLS_ENABLE=0; unset WEFT_NVLS
CB=examples/cbench/cbench
make -B -C examples/cbench CFLAGS='-O2 -Wall' >/dev/null 2>&1 || make -B -C examples/cbench CFLAGS='-O2 -Wall' OMP= >/dev/null
for r in 1 2 3; do for d in float bfloat16; do
  for lib in weft nccl; do
    if [ $lib = weft ]; then E=(env LD_PRELOAD=$PWD/.gpu/libweft_nccl.so WEFT_NCCL_FALLBACK=0); else E=(env -u LD_PRELOAD); fi
    echo "== $lib $d rep $r"
    timeout 60 "${E[@]}" $CB -g 2 -t allreduce -d $d -b 256M -e 1G -f 2 -w 5 -n 20 -G 10 -c 1 -p 0 2>&1 | grep -E "^ +[0-9]|wrong"
  done
done; done >"$OUT/ar.txt" 2>&1
cat "$OUT/ar.txt"
