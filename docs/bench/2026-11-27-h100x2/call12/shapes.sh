#!/usr/bin/env bash
# Call 12 (2026-11-27, 2×H100): AllReduce's large tier at 512 MB and 1 GB through the C ABI with
# 64, 96, 128 (the default) and 132 blocks of 512 threads, u4 (WEFT_ALLREDUCE), float and
# bfloat16, twice, NCCL beside: does a block count other than 128 serve 1 GB better, within the
# rule that every block of a plan is resident (at most one per SM)? Call 11 saw 64 and 256 blocks
# beat 128 at 1 GB bfloat16 in two runs each.
set -u
tar -xzf .gpuz/bundle.tgz
export NCCL_NVLS_ENABLE=0; unset WEFT_NVLS
CB=examples/cbench/cbench
make -B -C examples/cbench CFLAGS='-O2 -Wall' >/dev/null 2>&1 || make -B -C examples/cbench CFLAGS='-O2 -Wall' OMP= >/dev/null
for r in 1 2; do for d in bfloat16 float; do
  for b in 128 64 96 132; do
    echo "== weft ${b}x512 $d rep $r"
    WEFT_ALLREDUCE="1pa-LL16-1x1024@4K,1pa-LL16-8x1024@128K,2pa-64x1024-u4@16M,2pa-${b}x512-u4" LD_PRELOAD=$PWD/.gpu/libweft_nccl.so WEFT_NCCL_FALLBACK=0 \
      timeout 60 $CB -g 2 -t allreduce -d $d -b 512M -e 1G -f 2 -w 5 -n 20 -G 10 -c 0 -p 0 2>&1 | grep -E "^ +[0-9]"
  done
  echo "== nccl $d rep $r"
  env -u LD_PRELOAD timeout 60 $CB -g 2 -t allreduce -d $d -b 512M -e 1G -f 2 -w 5 -n 20 -G 10 -c 0 -p 0 2>&1 | grep -E "^ +[0-9]"
done; done >"$OUT/shapes.txt" 2>&1
cat "$OUT/shapes.txt"
