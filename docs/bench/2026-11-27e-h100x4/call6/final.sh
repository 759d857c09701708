#!/usr/bin/env bash
# Call 6 (2026-11-27, nineteenth session, 4×H100 `nvidia-h100-x4`): the session's final defaults
# through scripts/gpu-four.sh; then ReduceScatter's LL plan with its combine group on every LL
# block (this build) against the combine group on a share of them (the previous commit's library,
# .gpuz/old.so.gz), float 8 B - 1 MB on 4 and 3 ranks, twice alternated, NCCL in the same call.
set -u
T0=$(date +%s)
tar -xzf .gpuz/bundle.tgz
gunzip -c .gpuz/old.so.gz > .gpu/old_libweft_nccl.so
BUDGET=300 bash .gpu/gpu-four.sh >/dev/null 2>&1; echo "gpu-four rc=$?"
export NCCL_NVLS_ENABLE=0; unset WEFT_NVLS
export WEFT_REQUIRE=nvlink
B=.gpu; CB=examples/cbench/cbench
W=(env LD_PRELOAD=$PWD/$B/libweft_nccl.so WEFT_NCCL_FALLBACK=0 WEFT_DEBUG=WARN)
O=(env LD_PRELOAD=$PWD/$B/old_libweft_nccl.so WEFT_NCCL_FALLBACK=0 WEFT_DEBUG=WARN)
R=(env -u LD_PRELOAD NCCL_DEBUG=WARN)
mkdir -p "$OUT/x"
el() { echo "== $(( $(date +%s) - T0 )) s: $*"; }
run() { local n=$1; shift; timeout 60 "$@" >"$OUT/x/$n.log" 2>&1; echo "$n rc=$?"; }
{
for rep in 1 2; do
  for g in 4 3; do
    A=(-g $g -t reducescatter -d float -b 8 -e 1M -f 4 -w 5 -n 50 -G 10 -c 1 -p 0)
    el "rep $rep, $g ranks"
    run rs$g-nccl$rep "${R[@]}" $CB "${A[@]}"
    run rs$g-new$rep "${W[@]}" $CB "${A[@]}"
    run rs$g-old$rep "${O[@]}" $CB "${A[@]}"
  done
done
el ratios
for rep in 1 2; do for g in 4 3; do
  python3 scripts/cbench-ratios.py "$OUT/x/rs$g-nccl$rep.log" "$OUT/x/rs$g-old$rep.log" "$OUT/x/rs$g-new$rep.log"
done; done
grep -H "wrong elements" "$OUT"/x/*.log | grep -v " 0 wrong"; grep -c " 0 wrong elements" "$OUT"/x/*.log | tr '\n' ' '
el done
} >"$OUT/extra.txt" 2>&1
tar -czf "$OUT/extra-logs.tar.gz" -C "$OUT" x && rm -rf "$OUT/x"
cat "$OUT/summary.txt" "$OUT/extra.txt"
