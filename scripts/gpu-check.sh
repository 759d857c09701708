#!/usr/bin/env bash
# One device call: every GPU check of the foundation issue, then the benchmark
# matrix beside NCCL. Run from the repository root on the GPU host after
# `make gpu-bundle` here. Logs go to $OUT (or ./gpu-out).
#   BENCH_TYPES="float bfloat16"  BENCH_ARGS="-b 8 -e 1G -f 4 -G 20 -c 1"  SKIP_TESTS=1
set -u
OUT=${OUT:-./gpu-out}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 WEFT_REQUIRE=nvlink
unset WEFT_NVLS
B=.gpu
NGPU=$(nvidia-smi -L | wc -l)
summary=()
step() { # name, command...
  local name=$1; shift
  local t0=$(date +%s)
  "$@" >"$OUT/$name.log" 2>&1
  local rc=$?
  summary+=("$(printf '%-28s rc=%-3s %4ss' "$name" "$rc" $(( $(date +%s) - t0 )))")
  return $rc
}
{ date -u; hostname; nvidia-smi -L; nvidia-smi topo -m; nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1; } >"$OUT/machine.txt" 2>&1
if [ -z "${SKIP_TESTS:-}" ]; then
  step test-cuda   $B/internal_cuda.test -test.v -test.count=1
  step test-nvlink $B/hal_nvlink.test -test.v -test.count=1
  step test-nccl   $B/internal_sysnccl.test -test.v -test.count=1
  step test-weft   $B/weft.test -test.v -test.count=1 -test.run 'NVLink|GPU'
fi
for t in ${BENCH_TYPES:-float bfloat16}; do
  step "bench-$t-n$NGPU" $B/weft bench allreduce ${BENCH_ARGS:--b 8 -e 1G -f 4 -G 20 -c 1} -d "$t" --nproc "$NGPU" --hal nvlink --baseline nccl -J "$OUT/bench-$t-n$NGPU.json"
done
if [ -n "${CONFORMANCE:-}" ]; then
  step conformance $B/weft conformance --hal nvlink --ranks "$NGPU" --json "$OUT/conformance.json" --md "$OUT/conformance.md"
fi
echo "== summary ($NGPU GPUs) =="
printf '%s\n' "${summary[@]}"
for f in "$OUT"/bench-*.log; do
  [ -f "$f" ] || continue
  echo "== $(basename "$f")"; grep -v '^#  Rank' "$f" | tail -n 22
done
for f in "$OUT"/test-*.log; do
  grep -E -- '^(--- FAIL|FAIL|panic)' "$f" | head -5 | sed "s|^|$(basename "$f"): |"
done
