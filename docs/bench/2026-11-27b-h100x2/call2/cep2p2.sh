#!/usr/bin/env bash
# Call 2 (2026-11-27, sixteenth session, 2×H100): call 1 after the fix (the done waits queued after the
# copies have joined, the ready words before the sends fork). GPU tests, then cbench -g 2
# sendrecv, gather, scatter at 4 MB - 1 GB beside NCCL, weft with the path off
# (WEFT_CE_P2P_MIN_BYTES=0), on (default 64M) and on from 16M, alternated twice; -R 1 sendrecv;
# weft bench sendrecv --nproc 2 on beside NCCL.
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
timeout 150 $B/weft.test -test.count=1 -test.v -test.run 'TestCEP2PNVLink|TestCEP2PGraphReplayNVLink|TestP2PRegisteredNVLink' 2>&1 | grep -E "^(=== RUN|--- |PASS|FAIL|ok)|panic|Error" | grep -v "=== RUN" | tail -30
el cbench-build
make -B -C examples/cbench CFLAGS='-O2 -Wall' >/dev/null 2>&1 || make -B -C examples/cbench CFLAGS='-O2 -Wall' OMP= >/dev/null
A=(-g 2 -t sendrecv,gather,scatter -d float -b 4M -e 1G -f 4 -w 5 -n 20 -G 10 -c 1 -p 0)
for rep in 1 2; do
  el "rep $rep nccl";  timeout 60 "${R[@]}" $CB "${A[@]}" >"$OUT/nccl-$rep.log" 2>&1; echo rc=$?
  el "rep $rep off";   timeout 60 "${W[@]}" WEFT_CE_P2P_MIN_BYTES=0 $CB "${A[@]}" >"$OUT/off-$rep.log" 2>&1; echo rc=$?
  el "rep $rep on";    timeout 60 "${W[@]}" $CB "${A[@]}" >"$OUT/on-$rep.log" 2>&1; echo rc=$?
  el "rep $rep on16";  timeout 60 "${W[@]}" WEFT_CE_P2P_MIN_BYTES=16M $CB "${A[@]}" >"$OUT/on16-$rep.log" 2>&1; echo rc=$?
done
AR=(-g 2 -t sendrecv -d float -b 64M -e 1G -f 4 -w 5 -n 20 -G 10 -c 1 -p 0 -R 1)
el "reg nccl"; timeout 40 "${R[@]}" $CB "${AR[@]}" >"$OUT/reg-nccl.log" 2>&1; echo rc=$?
el "reg weft"; timeout 40 "${W[@]}" $CB "${AR[@]}" >"$OUT/reg-on.log" 2>&1; echo rc=$?
for rep in 1 2; do
  python3 scripts/cbench-ratios.py "$OUT/nccl-$rep.log" "$OUT/off-$rep.log" "$OUT/on-$rep.log" "$OUT/on16-$rep.log"
done
python3 scripts/cbench-ratios.py "$OUT/reg-nccl.log" "$OUT/reg-on.log"
grep -h "wrong\|Out of bounds" "$OUT"/on-*.log "$OUT"/on16-*.log "$OUT"/off-*.log "$OUT"/reg-on.log | sort | uniq -c | head
for m in on; do
  el "bench sendrecv $m"
  e=(); [ $m = off ] && e=(WEFT_CE_P2P_MIN_BYTES=0)
  timeout 60 env "${e[@]}" $B/weft bench sendrecv -b 64M -e 1G -f 4 -G 20 -c 1 --baseline nccl --nproc 2 2>&1 | grep -vE "^#  *[0-9]+ .*rank|^$" | tail -12
done
el done
} >"$OUT/cep2p2.txt" 2>&1
tail -c 11000 "$OUT/cep2p2.txt"
