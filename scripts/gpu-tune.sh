#!/usr/bin/env bash
# Issue 11 (AllReduce tuning) on the 2×H200 host in one device call. Run from the repository
# root after `make gpu-bundle-tune` here. Steps are time-boxed; the whole run stays under BUDGET
# seconds (default 560). Files back in $OUT: summary.txt, logs.tar.gz, tuning.json (the tuner's
# entry), ar-*.json (nccl-tests JSON of the acceptance sweeps), bench.log.
#
# Steps:
#   cand     every tuner candidate as a communicator's AllReduce, one rank per GPU, every element
#            checked (TestTuneCandidatesNVLink)
#   tune     weft bench all_reduce --tune beside NCCL, writes $OUT/tuning.json (target: ≤ 120 s on
#            2 GPUs with 48 candidates; its last lines give the search time and what was pruned)
#   float    the acceptance sweep, float, 8 B–1 GB, CUDA graphs, out-of-place, beside NCCL, with
#            the tuning file (the defaults where the tuner did not run); ar-float.svg draws it
#            (the 1 GB step: ≤ 30 s; the header's --time-budget line and '# cut' lines say where
#            the timed calls were cut)
#   bf16     the same in bfloat16 (ar-bf16.svg)
#   small    8 B–128 KB by 2 (the 32 KB outlier), float, with the tuning file
#
# Knobs: STEPS="cand tune float bf16 small"  BUDGET=560  TUNE_MAX=512M  NPROC=2
set -u
# shellcheck source=scripts/steps.sh
source "$(dirname "$0")/steps.sh"
BUDGET=${BUDGET:-560}
STEPS=${STEPS:-"cand tune float bf16 small"}
TUNE_MAX=${TUNE_MAX:-512M}
NPROC=${NPROC:-2}

# steps.sh keeps NVLink multicast off (NCCL_NVLS_ENABLE=0, WEFT_NVLS unset).
unset WEFT_ALLREDUCE
export WEFT_REQUIRE=${WEFT_REQUIRE:-nvlink} WEFT_CACHE_DIR=$WORK/cache
TUNING=$OUT/tuning.json
{ date -u; hostname; nvidia-smi -L; nvidia-smi topo -m; ls -la "$B"; } >"$L/machine.txt" 2>&1
cat "$L/machine.txt"
pass() { grep -E "^(ok|PASS|FAIL|--- FAIL)" $log | tail -n 3; }
rowsOf() { grep -E "^ +($1) " $log | tr -s " " | cut -d" " -f2,7,9,10,15,16,21,23 | tr "\n" ";"; }

if want cand; then
  step cand 200 'pass' -- "$B/weft.test" -test.count=1 -test.v -test.run 'TestTuneCandidatesNVLink'
fi
if want tune; then
  step tune 180 'grep -E "tune: (chose|search)" $log' -- "$B/weft" bench all_reduce --tune -b 8 -e "$TUNE_MAX" -f 4 -G 20 -n 20 -w 5 \
    --nproc "$NPROC" --baseline nccl --tune-file "$TUNING"
fi
# Sweeps read the tuner's file when it exists, else the defaults (the header names the source).
[ -f "$TUNING" ] && export WEFT_TUNING_FILE=$TUNING || export WEFT_TUNING_FILE=off
if want float; then
  step float 120 'rowsOf "8|8192|2097152|33554432|536870912"' -- "$B/weft" bench all_reduce -b 8 -e 1G -f 4 -G 20 -c 1 \
    --baseline nccl --nproc "$NPROC" -J "$OUT/ar-float.json" --plot "$OUT/ar-float.svg"
fi
if want bf16; then
  step bf16 120 'rowsOf "8|8192|2097152|33554432|536870912"' -- "$B/weft" bench all_reduce -b 8 -e 1G -f 4 -G 20 -c 1 -d bfloat16 \
    --baseline nccl --nproc "$NPROC" -J "$OUT/ar-bf16.json" --plot "$OUT/ar-bf16.svg"
fi
if want small; then
  step small 60 'rowsOf "16384|32768|65536"' -- "$B/weft" bench all_reduce -b 8 -e 128K -f 2 -G 20 -c 1 \
    --baseline nccl --nproc "$NPROC" -J "$OUT/ar-small.json"
fi

for f in "$L"/tune.log "$L"/float.log "$L"/bf16.log "$L"/small.log; do
  [ -f "$f" ] && { echo "=== $(basename "$f" .log)"; cat "$f"; }
done >"$OUT/bench.log"
save
echo "== summary"; cat "$OUT/summary.txt"
exit $nbad
