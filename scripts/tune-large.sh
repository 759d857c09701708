#!/usr/bin/env bash
# Block-count and LL-threshold sweep of weft's AllReduce (no baseline), to
# choose algorithms.DefaultConfig. Run after gpu-check.sh in the same call.
set -u
OUT=${OUT:-./gpu-out}
export NCCL_NVLS_ENABLE=0
N=$(nvidia-smi -L | wc -l)
for b in ${BLOCKS:-32 128}; do
  .gpu/weft bench allreduce -b 64M -e 1G -f 4 -G 20 -c 0 -w 3 --nproc "$N" --hal nvlink --blocks "$b" >"$OUT/tune-blocks-$b.log" 2>&1
  echo "blocks=$b"; grep -E '^ +[0-9]' "$OUT/tune-blocks-$b.log" | awk '{printf "  %11s  oop %8s us %7s GB/s   ip %8s us %7s GB/s\n", $1, $6, $8, $10, $12}'
done
for ll in ${LLMAX:-64K 1M}; do
  .gpu/weft bench allreduce -b 64K -e 2M -f 2 -G 20 -c 0 -w 3 --nproc "$N" --hal nvlink --ll-max "$ll" >"$OUT/tune-ll-$ll.log" 2>&1
  echo "ll-max=$ll"; grep -E '^ +[0-9]' "$OUT/tune-ll-$ll.log" | awk '{printf "  %11s  oop %8s us   ip %8s us\n", $1, $6, $10}'
done
