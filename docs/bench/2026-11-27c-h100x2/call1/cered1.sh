#!/usr/bin/env bash
# Call 1 (2026-11-27, seventeenth session, 2×H100): the copy-engine Reduce pushing straight into
# the root's output (cereduce.go) against its landing-slot form (the previous commit's library,
# .gpu/base) and NCCL, 64 MB - 1 GB, float (alternated twice) and bfloat16; the GPU tests of the
# copy-engine point-to-point path and Reduce; the export-range conformance case on hal/nvlink; the
# exchange's host stages in eager mode (WEFT_PROXY_PROFILE=1, -G 0 -H 1).
set -u
T0=$(date +%s)
tar -xzf .gpuz/bundle.tgz
export NCCL_NVLS_ENABLE=0; unset WEFT_NVLS
B=.gpu; CB=examples/cbench/cbench
W=(env LD_PRELOAD=$PWD/$B/libweft_nccl.so WEFT_NCCL_FALLBACK=0 WEFT_DEBUG=WARN)
L=(env LD_PRELOAD=$PWD/$B/base/libweft_nccl.so WEFT_NCCL_FALLBACK=0 WEFT_DEBUG=WARN)
R=(env -u LD_PRELOAD NCCL_DEBUG=WARN)
mkdir -p "$OUT"
el() { echo "== $(( $(date +%s) - T0 )) s: $*"; }
{
make -B -C examples/cbench CFLAGS='-O2 -Wall' >/dev/null 2>&1 || make -B -C examples/cbench CFLAGS='-O2 -Wall' OMP= >/dev/null
el tests
WEFT_REQUIRE=nvlink timeout 200 $B/weft.test -test.count=1 -test.v -test.run '^(TestCEReduceNVLink|TestCEP2PNVLink|TestCEP2PGraphReplayNVLink)$' >"$OUT/tests.log" 2>&1; echo rc=$?
grep -E "^(--- |ok|FAIL|PASS)|    --- " "$OUT/tests.log"
el conformance
WEFT_REQUIRE=nvlink timeout 60 $B/weft conformance --hal nvlink --run memory-mapped/export-range >"$OUT/conf.log" 2>&1; echo rc=$?
grep -iE "export-range|pass|fail" "$OUT/conf.log" | head -8
A=(-g 2 -t reduce -d float -b 64M -e 1G -f 2 -w 5 -n 20 -G 10 -c 1 -p 0)
el float
timeout 60 "${R[@]}" $CB "${A[@]}" >"$OUT/nccl.log" 2>&1; echo rc=$?
timeout 60 "${L[@]}" $CB "${A[@]}" >"$OUT/landing.log" 2>&1; echo rc=$?
timeout 60 "${W[@]}" $CB "${A[@]}" >"$OUT/direct.log" 2>&1; echo rc=$?
timeout 60 "${L[@]}" $CB "${A[@]}" >"$OUT/landing2.log" 2>&1; echo rc=$?
timeout 60 "${W[@]}" $CB "${A[@]}" >"$OUT/direct2.log" 2>&1; echo rc=$?
timeout 60 "${R[@]}" $CB "${A[@]}" >"$OUT/nccl2.log" 2>&1; echo rc=$?
python3 scripts/cbench-ratios.py "$OUT/nccl.log" "$OUT/landing.log" "$OUT/direct.log" "$OUT/landing2.log" "$OUT/direct2.log"
python3 scripts/cbench-ratios.py "$OUT/nccl2.log" "$OUT/landing.log" "$OUT/direct.log" "$OUT/landing2.log" "$OUT/direct2.log"
el bfloat16
A=(-g 2 -t reduce -d bfloat16 -b 64M -e 1G -f 2 -w 5 -n 20 -G 10 -c 1 -p 0)
timeout 60 "${R[@]}" $CB "${A[@]}" >"$OUT/bf-nccl.log" 2>&1; echo rc=$?
timeout 60 "${W[@]}" $CB "${A[@]}" >"$OUT/bf-direct.log" 2>&1; echo rc=$?
python3 scripts/cbench-ratios.py "$OUT/bf-nccl.log" "$OUT/bf-direct.log"
el eager
E=(-g 2 -t sendrecv,reduce -d float -b 256M -e 1G -f 4 -w 5 -n 20 -G 0 -c 1 -p 0 -H 1)
timeout 60 "${R[@]}" $CB "${E[@]}" >"$OUT/eager-nccl.log" 2>&1; echo rc=$?
timeout 60 "${W[@]}" WEFT_PROXY_PROFILE=1 $CB "${E[@]}" >"$OUT/eager-weft.log" 2>&1; echo rc=$?
python3 scripts/cbench-ratios.py "$OUT/eager-nccl.log" "$OUT/eager-weft.log"
for f in eager-nccl eager-weft; do echo "-- $f (size, time us, host us per enqueue)"; grep -E "^ +[0-9]" "$OUT/$f.log" | tr -s " " | cut -d" " -f2,7,15; done
grep -E "profile" "$OUT/eager-weft.log" | head -60
grep -h "wrong elements" "$OUT"/*.log | sort | uniq -c
el done
} >"$OUT/cered1.txt" 2>&1
cat "$OUT/cered1.txt"
