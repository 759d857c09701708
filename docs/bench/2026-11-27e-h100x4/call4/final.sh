#!/usr/bin/env bash
# Call 4 (2026-11-27, nineteenth session, 4×H100 `nvidia-h100-x4`): the defaults after calls 2-3
# (two-phase LL AllReduce to 1 MiB, rings on 64x512 with 16 MiB windows, two-group plans with 4 MiB
# windows from 4 ranks) through scripts/gpu-four.sh; then Broadcast/Reduce with the LL bound moved
# from 256 KiB to 512 KiB and 1 MiB (WEFT_ROOTED_LL_MAX_BYTES), twice alternated; then 2 ranks
# (GPUs 0-1 of this host) float 8 B - 1 GB beside NCCL, as a regression check of the kernels'
# window count (Group.PipelineFrom).
set -u
T0=$(date +%s)
tar -xzf .gpuz/bundle.tgz
BUDGET=300 bash .gpu/gpu-four.sh >/dev/null 2>&1; echo "gpu-four rc=$?"
export NCCL_NVLS_ENABLE=0; unset WEFT_NVLS
export WEFT_REQUIRE=nvlink
B=.gpu; CB=examples/cbench/cbench
W=(env LD_PRELOAD=$PWD/$B/libweft_nccl.so WEFT_NCCL_FALLBACK=0 WEFT_DEBUG=WARN)
R=(env -u LD_PRELOAD NCCL_DEBUG=WARN)
mkdir -p "$OUT/x"
el() { echo "== $(( $(date +%s) - T0 )) s: $*"; }
run() { local n=$1; shift; timeout 60 "$@" >"$OUT/x/$n.log" 2>&1; echo "$n rc=$?"; }
{
M=(-g 4 -t broadcast,reduce -d float -b 256K -e 2M -f 2 -w 3 -n 20 -G 10 -c 1 -p 0)
for rep in 1 2; do
  el "rep $rep: rooted LL bound"
  run r-nccl$rep "${R[@]}" $CB "${M[@]}"
  run r-def$rep "${W[@]}" $CB "${M[@]}"
  run r-ll512K-$rep "${W[@]}" WEFT_ROOTED_LL_MAX_BYTES=512K $CB "${M[@]}"
  run r-ll1M-$rep "${W[@]}" WEFT_ROOTED_LL_MAX_BYTES=1M $CB "${M[@]}"
done
el "2 ranks"
T=(-g 2 -d float -b 8 -e 1G -f 4 -w 3 -n 10 -G 10 -c 1 -p 0)
run two-nccl "${R[@]}" $CB "${T[@]}"
run two-weft "${W[@]}" $CB "${T[@]}"
el ratios
for rep in 1 2; do python3 scripts/cbench-ratios.py "$OUT/x/r-nccl$rep.log" "$OUT"/x/r-ll*-$rep.log "$OUT/x/r-def$rep.log"; done
python3 scripts/cbench-ratios.py "$OUT/x/two-nccl.log" "$OUT/x/two-weft.log"
grep -H "wrong elements" "$OUT"/x/*.log | grep -v " 0 wrong"; grep -c " 0 wrong elements" "$OUT"/x/*.log | tr '\n' ' '
el done
} >"$OUT/extra.txt" 2>&1
tar -czf "$OUT/extra-logs.tar.gz" -C "$OUT" x && rm -rf "$OUT/x"
cat "$OUT/summary.txt" "$OUT/extra.txt"
