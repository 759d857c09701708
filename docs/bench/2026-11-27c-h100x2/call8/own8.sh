#!/usr/bin/env bash
# Call 8 (2026-11-27, seventeenth session, 2×H100): copies to itself of the copy-engine
# point-to-point path on SMs (the copy kernel) instead of a copy engine, against the previous
# commit's library (.gpu/base), gather/scatter/broadcast/alltoall/sendrecv 64 MB - 1 GB float,
# alternated twice, NCCL beside; Broadcast through copy engines from 64 MB (WEFT_CE_P2P_MIN_BYTES=16M);
# the GPU tests of the path and the window test fixed after call 7.
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
el tests
WEFT_REQUIRE=nvlink timeout 120 $B/weft.test -test.count=1 -test.v -test.run '^(TestWindowAllReduceNVLink|TestCEP2PNVLink|TestCEP2PGraphReplayNVLink)$' >"$OUT/tests.log" 2>&1; echo rc=$?
grep -E "^(--- |ok|FAIL|PASS)|    --- |wrong|want" "$OUT/tests.log" | head -20
A=(-g 2 -t gather,scatter,broadcast,alltoall,sendrecv -d float -b 64M -e 1G -f 2 -w 5 -n 20 -G 10 -c 1 -p 0)
for rep in 1 2; do
  el "rep $rep"
  timeout 90 "${R[@]}" $CB "${A[@]}" >"$OUT/logs/nccl$rep.log" 2>&1; echo rc=$?
  timeout 90 "${L[@]}" $CB "${A[@]}" >"$OUT/logs/base$rep.log" 2>&1; echo rc=$?
  timeout 90 "${W[@]}" $CB "${A[@]}" >"$OUT/logs/own$rep.log" 2>&1; echo rc=$?
done
python3 scripts/cbench-ratios.py "$OUT/logs/nccl1.log" "$OUT/logs/base1.log" "$OUT/logs/own1.log"
python3 scripts/cbench-ratios.py "$OUT/logs/nccl2.log" "$OUT/logs/base2.log" "$OUT/logs/own2.log"
el broadcast16M
A=(-g 2 -t broadcast -d float -b 32M -e 256M -f 2 -w 5 -n 20 -G 10 -c 1 -p 0)
timeout 60 "${R[@]}" $CB "${A[@]}" >"$OUT/logs/bc-nccl.log" 2>&1; echo rc=$?
timeout 60 "${W[@]}" $CB "${A[@]}" >"$OUT/logs/bc-default.log" 2>&1; echo rc=$?
timeout 60 "${W[@]}" WEFT_CE_P2P_MIN_BYTES=16M $CB "${A[@]}" >"$OUT/logs/bc-16M.log" 2>&1; echo rc=$?
timeout 60 "${L[@]}" WEFT_CE_P2P_MIN_BYTES=16M $CB "${A[@]}" >"$OUT/logs/bc-base16M.log" 2>&1; echo rc=$?
python3 scripts/cbench-ratios.py "$OUT/logs/bc-nccl.log" "$OUT/logs/bc-default.log" "$OUT/logs/bc-16M.log" "$OUT/logs/bc-base16M.log"
grep -h "wrong elements" "$OUT"/logs/*.log | sort | uniq -c
el done
} >"$OUT/own8.txt" 2>&1
tar -czf "$OUT/logs.tar.gz" -C "$OUT" logs && rm -rf "$OUT/logs"
cat "$OUT/own8.txt"
