#!/usr/bin/env bash
# Call 3 (2026-11-27, seventeenth session, 2×H100): the copy-engine Reduce into the root's output on one lane
# with windows shrinking towards the end (ceRedSchedule: last, largest MiB and growth through
# WEFT_EXP_CERED, an experiment's setting; default 4,256,2) against the landing-slot form (.gpu/base,
# the session's first commit's parent) and NCCL, 64 MB - 1 GB float; bfloat16 with the default.
set -u
T0=$(date +%s)
tar -xzf .gpuz/bundle.tgz
export NCCL_NVLS_ENABLE=0; unset WEFT_NVLS
B=.gpu; CB=examples/cbench/cbench
W=(env LD_PRELOAD=$PWD/$B/libweft_nccl.so WEFT_NCCL_FALLBACK=0 WEFT_DEBUG=WARN)
L=(env LD_PRELOAD=$PWD/$B/base/libweft_nccl.so WEFT_NCCL_FALLBACK=0 WEFT_DEBUG=WARN)
R=(env -u LD_PRELOAD NCCL_DEBUG=WARN)
mkdir -p "$OUT/logs"
el() { echo "== $(( $(date +%s) - T0 )) s: $*"; }
{
make -B -C examples/cbench CFLAGS='-O2 -Wall' >/dev/null 2>&1 || make -B -C examples/cbench CFLAGS='-O2 -Wall' OMP= >/dev/null
A=(-g 2 -t reduce -d float -b 64M -e 1G -f 2 -w 5 -n 20 -G 10 -c 1 -p 0)
for rep in 1 2; do
  el "rep $rep"
  timeout 60 "${R[@]}" $CB "${A[@]}" >"$OUT/logs/nccl$rep.log" 2>&1; echo rc=$?
  timeout 60 "${L[@]}" $CB "${A[@]}" >"$OUT/logs/landing$rep.log" 2>&1; echo rc=$?
  for v in 4,256,2 8,256,2 2,256,2 4,512,2 4,256,1.5 4,128,2 16,256,2; do
    timeout 60 "${W[@]}" WEFT_EXP_CERED=$v $CB "${A[@]}" >"$OUT/logs/d${v//,/_}-$rep.log" 2>&1; echo rc=$?
  done
done
el bfloat16
A=(-g 2 -t reduce -d bfloat16 -b 64M -e 1G -f 2 -w 5 -n 20 -G 10 -c 1 -p 0)
timeout 60 "${R[@]}" $CB "${A[@]}" >"$OUT/logs/bf-nccl.log" 2>&1; echo rc=$?
timeout 60 "${W[@]}" $CB "${A[@]}" >"$OUT/logs/bf-direct.log" 2>&1; echo rc=$?
python3 scripts/cbench-ratios.py "$OUT/logs/bf-nccl.log" "$OUT/logs/bf-direct.log"
python3 scripts/cbench-ratios.py "$OUT/logs/nccl1.log" "$OUT"/logs/landing1.log "$OUT"/logs/d*-1.log
python3 scripts/cbench-ratios.py "$OUT/logs/nccl2.log" "$OUT"/logs/landing2.log "$OUT"/logs/d*-2.log
grep -h "wrong elements" "$OUT"/logs/*.log | sort | uniq -c
el done
} >"$OUT/cered3.txt" 2>&1
tar -czf "$OUT/logs.tar.gz" -C "$OUT" logs && rm -rf "$OUT/logs"
cat "$OUT/cered3.txt"
