#!/usr/bin/env bash
# The check of three ranks and more on a 4-GPU host (nvidia-h100-x4 / nvidia-h200-x4), in one device
# call, beside NCCL 2.28.3: every collective through the C ABI (examples/cbench -g 4, one process
# per GPU, CUDA graphs, out of place, every element checked), float 8 B - 512 MB by factors of 4,
# bfloat16 from 512 KB, 1 GB, Broadcast/Reduce rooted at rank 3 in place, symmetric windows (-R 2),
# and 3 ranks for Broadcast/Reduce (the split plans from 3 ranks), the point-to-point collectives
# on copy engines (not a default past 2 ranks); then the NCCL/weft ratios. The step "between"
# covers the sizes that factors of 4 skip (1.5 MB × 2^k: 3, 6, 12, 24 … MB), where the 5–7 MB
# AllReduce gap of the twenty-second session's build hid (docs/bench/2026-11-27i-h100x4, call 10).
# 4×H100 on 2026-11-27 (docs/bench/2026-11-27d-h100x2, calls 3 and 7 together): about 150 s.
# Run from the repository root after `make gpu-bundle-four` here:
#   tar -xzf .gpuz/bundle.tgz && bash .gpu/gpu-four.sh
# Files back in $OUT: summary.txt, ratios.txt, logs.tar.gz. Knobs: BUDGET=400 NP=4 MAXB=512M, and any
# WEFT_* variable (WEFT_RING_MIN_BYTES, WEFT_HB_SHAPE, WEFT_ROOTED_SHAPE) passes to the weft runs.
set -u
# shellcheck source=scripts/steps.sh
source "$(dirname "$0")/steps.sh"
BUDGET=${BUDGET:-400}
STEPS="all"
NP=${NP:-4}
MAXB=${MAXB:-512M}
LIB=$B/libweft_nccl.so
export WEFT_REQUIRE=${WEFT_REQUIRE:-nvlink}
WEFT_ENV=(env LD_PRELOAD="$LIB" WEFT_NCCL_FALLBACK=0 WEFT_DEBUG=WARN)
REF_ENV=(env -u LD_PRELOAD NCCL_DEBUG=WARN)
CB=examples/cbench/cbench
{ date -u; hostname; nvidia-smi -L; nvidia-smi topo -m; ls -la "$B"; } >"$L/machine.txt" 2>&1
wrong() { grep -E "wrong elements in all" $log | tail -n 1; }
step cbench-build 60 'ls -la $CB | cut -c1-80' -- bash -c "make -B -C examples/cbench CFLAGS='-O2 -Wall' >/dev/null || \
  make -B -C examples/cbench CFLAGS='-O2 -Wall' OMP= >/dev/null"
pair() { # pair NAME LIMIT CBENCH-ARGS...: NCCL, then weft, the same arguments
  local name=$1 limit=$2; shift 2
  step "nccl-$name" "$limit" 'wrong' -- "${REF_ENV[@]}" $CB "$@"
  step "weft-$name" "$limit" 'wrong' -- "${WEFT_ENV[@]}" $CB "$@"
}
pair float 60 -g "$NP" -d float -b 8 -e "$MAXB" -f 4 -w 3 -n 10 -G 10 -c 1 -p 0
pair bfloat16 45 -g "$NP" -d bfloat16 -b 512K -e "$MAXB" -f 4 -w 3 -n 10 -G 10 -c 1 -p 0
pair 1g 45 -g "$NP" -d float -b 1G -e 1G -w 3 -n 10 -G 10 -c 1 -p 0
pair root-inplace 30 -g "$NP" -t broadcast,reduce -d bfloat16 -r $((NP - 1)) -b 1M -e 256M -f 16 -w 3 -n 10 -G 10 -c 1 -p 1
pair win 45 -g "$NP" -t allreduce,allgather,reducescatter -d bfloat16 -R 2 -b 8 -e "$MAXB" -f 8 -w 3 -n 10 -G 10 -c 1 -p 0
pair between 60 -g "$NP" -d float -b 1536K -e "$MAXB" -f 2 -w 3 -n 10 -G 5 -c 1 -p 0
pair n3 30 -g 3 -t broadcast,reduce,allreduce,reducescatter -d float -b 512K -e "$MAXB" -f 4 -w 3 -n 10 -G 10 -c 1 -p 0
# Not a default past 2 ranks, measured here for the next choice: the point-to-point collectives on
# copy engines (WEFT_CE_P2P_MIN_BYTES=32M, as on 2 ranks), against weft-float's SM plans.
step weft-cep2p 45 'wrong' -- "${WEFT_ENV[@]}" WEFT_CE_P2P_MIN_BYTES=32M $CB -g "$NP" -t alltoall,sendrecv,gather,scatter -d float -b 8M -e "$MAXB" -f 4 -w 3 -n 10 -G 10 -c 1 -p 0
for s in float between bfloat16 1g root-inplace win n3; do
  [ -f "$L/nccl-$s.log" ] && [ -f "$L/weft-$s.log" ] && python3 "$ROOT/scripts/cbench-ratios.py" "$L/nccl-$s.log" "$L/weft-$s.log"
done >"$OUT/ratios.txt" 2>&1
[ -f "$L/weft-cep2p.log" ] && python3 "$ROOT/scripts/cbench-ratios.py" "$L/nccl-float.log" "$L/weft-cep2p.log" >>"$OUT/ratios.txt" 2>&1
save
{
  echo "== gpu-four: $NP GPUs, $(( $(date +%s) - T0 ))s, MAXB=$MAXB"
  printf '%-20s %-7s %5s  %s\n' step result secs note
  printf '%s\n' "${rows[@]}"
  echo "== $nbad step(s) failed, timed out or skipped"
  cat "$OUT/ratios.txt"
} | tee "$OUT/summary.txt"
[ "$nbad" -eq 0 ]
