#!/usr/bin/env bash
# Call 2 (2026-11-28, 2×H100): the copy-engine AllReduce (cear.go) on GPUs. Conformance
# memory-mapped/stream-reduce, TestCEAllReduceNVLink, then AllReduce 64 MB – 1 GB through the
# C ABI (examples/cbench, CUDA graphs, out of place, checked) beside NCCL in the same call:
# NCCL, weft's default (SM 2PA / HB) and WEFT_ALGO=ce, float and bfloat16; then three shapes
# of the executor in bfloat16.
set -u
tar -xzf .gpuz/bundle.tgz
export NCCL_NVLS_ENABLE=0; unset WEFT_NVLS
export WEFT_REQUIRE=nvlink
T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
{
el conformance
timeout 120 .gpu/weft conformance --hal nvlink --ranks 2 --run memory-mapped/stream-reduce,memory-mapped/stream-ops 2>&1 | tail -6
el tests
timeout 150 .gpu/weft.test -test.run 'TestCEAllReduceNVLink|TestCEAllGatherNVLink' -test.v 2>&1 | grep -E "^(---|===|ok|FAIL|PASS)|wrong|Error|error" | head -30
} >"$OUT/tests.txt" 2>&1
cat "$OUT/tests.txt"
CB=examples/cbench/cbench
make -B -C examples/cbench CFLAGS='-O2 -Wall' >/dev/null 2>&1 || make -B -C examples/cbench CFLAGS='-O2 -Wall' OMP= >/dev/null
run() { # name, env..., then cbench args after --
  local name=$1; shift
  local e=(); while [ "$1" != -- ]; do e+=("$1"); shift; done; shift
  echo "== $name"
  timeout 60 env "${e[@]}" $CB -g 2 -t allreduce "$@" -b 64M -e 1G -f 2 -w 5 -n 20 -G 10 -c 1 -p 0 2>&1 | grep -E "^ +[0-9]|wrong|rror"
}
W=(LD_PRELOAD=$PWD/.gpu/libweft_nccl.so WEFT_NCCL_FALLBACK=0)
{
for d in float bfloat16; do
  run "nccl $d" -u LD_PRELOAD -- -d $d
  run "weft-default $d" "${W[@]}" -- -d $d
  run "weft-ce $d" "${W[@]}" WEFT_ALGO=ce -- -d $d
done
for sh in 32x512w32M 64x512w16M 16x1024w16M; do
  run "weft-ce $sh bfloat16" "${W[@]}" WEFT_ALGO=ce WEFT_CE_ALLREDUCE_SHAPE=$sh -- -d bfloat16
done
run "nccl bfloat16 (again)" -u LD_PRELOAD -- -d bfloat16
run "weft-ce bfloat16 (again)" "${W[@]}" WEFT_ALGO=ce -- -d bfloat16
el done
} >"$OUT/ar.txt" 2>&1
cat "$OUT/ar.txt"
