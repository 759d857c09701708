#!/usr/bin/env bash
# Call 4 (2026-11-27, seventeenth session, 2×H100): TestCEReduceNVLink (both forms of the
# copy-engine Reduce); the window schedule of the Reduce into the root's output around call 3's
# best (last 4 MiB, largest 256, growth 1.5; WEFT_EXP_CERED=last,largest,growth, an experiment's
# setting) at 256 MB - 1 GB with WEFT_CE_REDUCE_DIRECT_MIN_BYTES=0; the defaults (direct from
# 512 MiB) at 64 MB - 1 GB float and bfloat16; NCCL beside, alternated twice.
set -u
T0=$(date +%s)
tar -xzf .gpuz/bundle.tgz
export NCCL_NVLS_ENABLE=0; unset WEFT_NVLS
B=.gpu; CB=examples/cbench/cbench
W=(env LD_PRELOAD=$PWD/$B/libweft_nccl.so WEFT_NCCL_FALLBACK=0 WEFT_DEBUG=WARN)
R=(env -u LD_PRELOAD NCCL_DEBUG=WARN)
mkdir -p "$OUT/logs"
el() { echo "== $(( $(date +%s) - T0 )) s: $*"; }
{
make -B -C examples/cbench CFLAGS='-O2 -Wall' >/dev/null 2>&1 || make -B -C examples/cbench CFLAGS='-O2 -Wall' OMP= >/dev/null
el tests
WEFT_REQUIRE=nvlink timeout 120 $B/weft.test -test.count=1 -test.v -test.run '^TestCEReduceNVLink$' >"$OUT/tests.log" 2>&1; echo rc=$?
grep -E "^(--- |ok|FAIL|PASS)|    --- |wrong|want" "$OUT/tests.log" | head
A=(-g 2 -t reduce -d float -b 256M -e 1G -f 2 -w 5 -n 20 -G 10 -c 1 -p 0)
for rep in 1 2; do
  el "rep $rep"
  timeout 60 "${R[@]}" $CB "${A[@]}" >"$OUT/logs/nccl$rep.log" 2>&1; echo rc=$?
  for v in 4,256,1.5 4,256,1.3 4,256,1.25 4,128,1.5 2,256,1.5 8,256,1.5 4,512,1.5 4,1024,1.3; do
    timeout 60 "${W[@]}" WEFT_CE_REDUCE_DIRECT_MIN_BYTES=0 WEFT_EXP_CERED=$v $CB "${A[@]}" >"$OUT/logs/d${v//,/_}-$rep.log" 2>&1; echo rc=$?
  done
done
python3 scripts/cbench-ratios.py "$OUT/logs/nccl1.log" "$OUT"/logs/d*-1.log
python3 scripts/cbench-ratios.py "$OUT/logs/nccl2.log" "$OUT"/logs/d*-2.log
el defaults
for d in float bfloat16; do
  A=(-g 2 -t reduce -d $d -b 64M -e 1G -f 2 -w 5 -n 20 -G 10 -c 1 -p 0)
  timeout 60 "${R[@]}" $CB "${A[@]}" >"$OUT/logs/def-nccl-$d.log" 2>&1; echo rc=$?
  timeout 60 "${W[@]}" $CB "${A[@]}" >"$OUT/logs/def-weft-$d.log" 2>&1; echo rc=$?
  python3 scripts/cbench-ratios.py "$OUT/logs/def-nccl-$d.log" "$OUT/logs/def-weft-$d.log"
done
grep -h "wrong elements" "$OUT"/logs/*.log | sort | uniq -c
el done
} >"$OUT/cered4.txt" 2>&1
tar -czf "$OUT/logs.tar.gz" -C "$OUT" logs && rm -rf "$OUT/logs"
cat "$OUT/cered4.txt"
