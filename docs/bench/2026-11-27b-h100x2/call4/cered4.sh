#!/usr/bin/env bash
# Call 4 (2026-11-27, sixteenth session, 2×H100): the host-issued copy-engine Reduce (cereduce.go).
# GPU test, then cbench -g 2 reduce and scatter at 64 MB - 1 GB (factor 2), float and bfloat16,
# beside NCCL: weft with the copy-engine Reduce off (WEFT_CE_REDUCE_MIN_BYTES=0) and on from 64M.
set -u
T0=$(date +%s)
tar -xzf .gpuz/bundle.tgz
export NCCL_NVLS_ENABLE=0; unset WEFT_NVLS
export WEFT_REQUIRE=nvlink
B=.gpu; CB=examples/cbench/cbench
W=(env LD_PRELOAD=$PWD/$B/libweft_nccl.so WEFT_NCCL_FALLBACK=0 WEFT_DEBUG=WARN)
R=(env -u LD_PRELOAD NCCL_DEBUG=WARN)
mkdir -p "$OUT"
el() { echo "== $(( $(date +%s) - T0 )) s: $*"; }
{
el tests
timeout 100 $B/weft.test -test.count=1 -test.v -test.run 'TestCEReduceNVLink' 2>&1 | grep -E "^(--- |    --- |PASS|FAIL|ok)|panic|wrong" | tail -20
make -B -C examples/cbench CFLAGS='-O2 -Wall' >/dev/null 2>&1 || make -B -C examples/cbench CFLAGS='-O2 -Wall' OMP= >/dev/null
for d in float bfloat16; do
  A=(-g 2 -t reduce,scatter -d $d -b 64M -e 1G -f 2 -w 5 -n 20 -G 10 -c 1 -p 0)
  el "$d nccl"; timeout 60 "${R[@]}" $CB "${A[@]}" >"$OUT/nccl-$d.log" 2>&1; echo rc=$?
  el "$d off";  timeout 60 "${W[@]}" WEFT_CE_REDUCE_MIN_BYTES=0 $CB "${A[@]}" >"$OUT/off-$d.log" 2>&1; echo rc=$?
  el "$d on";   timeout 60 "${W[@]}" WEFT_CE_REDUCE_MIN_BYTES=64M $CB "${A[@]}" >"$OUT/on-$d.log" 2>&1; echo rc=$?
  python3 scripts/cbench-ratios.py "$OUT/nccl-$d.log" "$OUT/off-$d.log" "$OUT/on-$d.log"
done
grep -h "wrong elements" "$OUT"/on-*.log "$OUT"/off-*.log
grep -h -A7 "^# reduce" "$OUT"/nccl-float.log "$OUT"/on-float.log | grep -E "^ +[0-9]" | tr -s " " | cut -d" " -f2,7-9
el done
} >"$OUT/cered4.txt" 2>&1
cat "$OUT/cered4.txt"
