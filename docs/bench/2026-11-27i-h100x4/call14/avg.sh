#!/usr/bin/env bash
# Call 14 (2026-11-27, twenty-third session, 4×H100): a floating Avg now runs on staged plans as
# PreMulSum with 1/n (algorithms.Choice.Runs): on 4 ranks the ring AllReduce (from 8 MiB) and the
# split Reduce serve it where the all-pairs windowed plans did. Every element checked: weft bench
# (Comm.Launch) AllReduce and Reduce with -o avg, float and int32, 8 – 64 MB; PyTorch's AVG
# all_reduce (dropin_check.py, float32 / bfloat16 / int64, up to 16 MB).
# Build: make gpu-bundle-four (HEAD 36ebbd8); carry .gpuz.
set -u
T0=$(date +%s)
tar -xzf .gpuz/bundle.tgz
export NCCL_NVLS_ENABLE=0; unset WEFT_NVLS
export WEFT_REQUIRE=nvlink
B=.gpu
mkdir -p "$OUT/logs"
el() { echo "== $(( $(date +%s) - T0 )) s: $*"; }
{
for c in all_reduce reduce; do
  for d in float int32; do
    R=(); [ $c = all_reduce ] && R=(--raw)
    timeout 60 $B/weft run --nproc 4 -- $B/weft bench $c "${R[@]}" --hal nvlink -o avg -d $d -b 8M -e 64M -f 2 -w 1 -n 3 >"$OUT/logs/$c-$d.log" 2>&1
    echo "$c $d rc=$? rows $(grep -cE '^ +[0-9]' "$OUT/logs/$c-$d.log"), wrong $(awk '$1 ~ /^[0-9]+$/ {w += $9 + $13} END {print w + 0}' "$OUT/logs/$c-$d.log"), plans $(awk '$1 ~ /^[0-9]+$/ {print $NF}' "$OUT/logs/$c-$d.log" | sort -u | tr '\n' ' ')"
  done
done
el "PyTorch all_reduce / reduce_scatter / reduce checks, 4 ranks"
WEFT_NCCL_FALLBACK=0 LD_PRELOAD=$PWD/$B/libweft_nccl.so timeout 120 torchrun --nproc-per-node 4 --master-port 29631 examples/torch/dropin_check.py --no-graph --only '^(all_reduce|reduce)' --sizes 1,4194307 --large 0 --quiet >"$OUT/logs/torch.log" 2>&1
echo "torch rc=$? $(tail -n 1 "$OUT/logs/torch.log")"
el done
} >"$OUT/avg.txt" 2>&1
tar -czf "$OUT/logs.tar.gz" -C "$OUT" logs && rm -rf "$OUT/logs"
cat "$OUT/avg.txt"
