#!/usr/bin/env bash
# Issue 20 item 5 (the tuner's full search on 2 GPUs, and its file used by a sweep) and issue 21
# on GPUs (ring, double-tree and Bruck plans forced with WEFT_ALGO, beside the all-pairs plans
# and NCCL in the same run), in one device call. Run from the repository root after
# `make gpu-bundle-net` here (the weft CLI alone). Time-boxed; the run stays under BUDGET
# seconds (default 540).
#
# Files back in $OUT: summary.txt, logs.tar.gz, tuning.json, bench.log, *.svg.
# Knobs: STEPS="tune tuned families"  BUDGET=540  MAXB=512M
set -u
# shellcheck source=scripts/steps.sh
source "$(dirname "$0")/steps.sh"
BUDGET=${BUDGET:-540}
STEPS=${STEPS:-"tune tuned families"}
MAXB=${MAXB:-512M}

# steps.sh keeps NVLink multicast off (NCCL_NVLS_ENABLE=0, WEFT_NVLS unset).
export WEFT_REQUIRE=${WEFT_REQUIRE:-nvlink}
NP=${NP:-2}
{ date -u; hostname; nvidia-smi -L; nvidia-smi topo -m; ls -la "$B"; } >"$L/machine.txt" 2>&1
cat "$L/machine.txt"
sweep() { grep -E "^# (Out of bounds|Avg bus)" $log; }

# ---- the tuner: every candidate at every size, pruned, checked once per size; its total time
if want tune; then
  step tune 200 'grep -E "search|pruned|wrote" $log | tail -n 2' -- \
    "$B/weft" bench all_reduce --tune -b 8 -e "$MAXB" -f 4 -G 20 --nproc "$NP" --baseline nccl --tune-file "$OUT/tuning.json"
fi
# ---- the acceptance sweep with the tuner's file
if want tuned; then
  step tuned 60 'sweep' -- env WEFT_TUNING_FILE="$OUT/tuning.json" \
    "$B/weft" bench all_reduce -b 8 -e "$MAXB" -f 4 -G 20 -c 1 --baseline nccl --nproc "$NP" --plot "$OUT/all_reduce-tuned.svg"
fi
# ---- plan families forced: all-pairs (default), ring, double tree; Bruck and ring AllGather
if want families; then
  for fam in default ring tree; do
    algo=(WEFT_ALGO="$fam"); [ "$fam" = default ] && algo=(-u WEFT_ALGO)
    step "ar-$fam" 60 'sweep' -- env "${algo[@]}" \
      "$B/weft" bench all_reduce --raw -b 8 -e "$MAXB" -f 4 -G 20 -c 1 --baseline nccl --nproc "$NP" --plot "$OUT/all_reduce-$fam.svg"
  done
  for fam in bruck ring; do
    step "ag-$fam" 50 'sweep' -- env WEFT_ALGO=$fam \
      "$B/weft" bench all_gather -b 8 -e "$MAXB" -f 4 -G 20 -c 1 --baseline nccl --nproc "$NP" --plot "$OUT/all_gather-$fam.svg"
  done
fi
for f in "$L"/tuned.log "$L"/ar-*.log "$L"/ag-*.log; do [ -f "$f" ] && { echo "== $(basename "$f")"; cat "$f"; }; done >"$OUT/bench.log" 2>/dev/null
save
{
  echo "== gpu-tune-ring: $NP GPUs, $(( $(date +%s) - T0 ))s, MAXB=$MAXB"
  printf '%-20s %-7s %5s  %s\n' step result secs note
  printf '%s\n' "${rows[@]}"
  echo "== $nbad step(s) failed, timed out or skipped"
} | tee "$OUT/summary.txt"
[ "$nbad" -eq 0 ]
