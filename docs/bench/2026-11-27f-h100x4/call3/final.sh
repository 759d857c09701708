#!/usr/bin/env bash
# Call 3 (2026-11-27, twentieth session, 4×H100 `nvidia-h100-x4`): scripts/gpu-four.sh on the
# LL128 defaults (every collective, 4 ranks float/bfloat16/1 GB, root 3 in place, symmetric
# windows, 3 ranks), then AllGather, ReduceScatter and AllToAll on LL128 lines (their wide LL
# plans took LL16 in calls 1-2) against LL16 on the same bounds (WEFT_LL128=0, on 2 ranks with
# WEFT_COLL_LL_MAX_BYTES=1M as the LL128 default), 4 and 2 ranks, 64 KB - 4 MB, two alternations.
set -u
T0=$(date +%s)
tar -xzf .gpuz/bundle.tgz
export NCCL_NVLS_ENABLE=0; unset WEFT_NVLS
export WEFT_REQUIRE=nvlink
BUDGET=230 bash .gpu/gpu-four.sh >"$OUT/four.txt" 2>&1
B=.gpu; CB=examples/cbench/cbench
W=(env LD_PRELOAD=$PWD/$B/libweft_nccl.so WEFT_NCCL_FALLBACK=0 WEFT_DEBUG=WARN)
R=(env -u LD_PRELOAD NCCL_DEBUG=WARN)
mkdir -p "$OUT/ab"
el() { echo "== $(( $(date +%s) - T0 )) s: $*"; }
run() { local n=$1; shift; timeout 60 "$@" >"$OUT/ab/$n.log" 2>&1; echo "$n rc=$? $(grep -c ' 0 wrong' "$OUT/ab/$n.log") ok lines"; }
{
S=(-t allgather,reducescatter,alltoall -d float -b 64K -e 4M -f 2 -w 5 -n 20 -G 10 -c 1 -p 0)
for rep in 1 2; do
  el "rep $rep"
  run n4-nccl$rep "${R[@]}" $CB -g 4 "${S[@]}"
  run n4-ll128-$rep "${W[@]}" $CB -g 4 "${S[@]}"
  run n4-ll16-$rep "${W[@]}" WEFT_LL128=0 $CB -g 4 "${S[@]}"
  run n2-nccl$rep "${R[@]}" $CB -g 2 "${S[@]}"
  run n2-ll128-$rep "${W[@]}" $CB -g 2 "${S[@]}"
  run n2-ll16-$rep "${W[@]}" WEFT_LL128=0 WEFT_COLL_LL_MAX_BYTES=1M $CB -g 2 "${S[@]}"
done
for rep in 1 2; do
  python3 scripts/cbench-ratios.py "$OUT/ab/n4-nccl$rep.log" "$OUT/ab/n4-ll16-$rep.log" "$OUT/ab/n4-ll128-$rep.log"
  python3 scripts/cbench-ratios.py "$OUT/ab/n2-nccl$rep.log" "$OUT/ab/n2-ll16-$rep.log" "$OUT/ab/n2-ll128-$rep.log"
done
grep -H "wrong elements" "$OUT"/ab/*.log | grep -v " 0 wrong"
el done
} >"$OUT/ab.txt" 2>&1
tar -czf "$OUT/ab-logs.tar.gz" -C "$OUT" ab && rm -rf "$OUT/ab"
cat "$OUT/four.txt" | head -40
cat "$OUT/ab.txt"
