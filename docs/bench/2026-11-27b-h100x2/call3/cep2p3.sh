#!/usr/bin/env bash
# Call 3 (2026-11-27, sixteenth session, 2×H100): Broadcast and AllToAll on the copy-engine
# point-to-point path (groups of sends and receives from 64 MiB). GPU tests, then cbench -g 2
# broadcast and alltoall at 16 MB - 1 GB, float, beside NCCL, weft off and on.
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
timeout 100 $B/weft.test -test.count=1 -test.v -test.run 'TestCEP2PNVLink|TestCEP2PGraphReplayNVLink|TestInPlaceAllToAllNVLink' 2>&1 | grep -E "^(--- |PASS|FAIL|ok)|panic" | tail -20
make -B -C examples/cbench CFLAGS='-O2 -Wall' >/dev/null 2>&1 || make -B -C examples/cbench CFLAGS='-O2 -Wall' OMP= >/dev/null
A=(-g 2 -t broadcast,alltoall -d float -b 16M -e 1G -f 4 -w 5 -n 20 -G 10 -c 1 -p 0)
el nccl; timeout 60 "${R[@]}" $CB "${A[@]}" >"$OUT/nccl.log" 2>&1; echo rc=$?
el off;  timeout 60 "${W[@]}" WEFT_CE_P2P_MIN_BYTES=0 $CB "${A[@]}" >"$OUT/off.log" 2>&1; echo rc=$?
el on;   timeout 60 "${W[@]}" $CB "${A[@]}" >"$OUT/on.log" 2>&1; echo rc=$?
python3 scripts/cbench-ratios.py "$OUT/nccl.log" "$OUT/off.log" "$OUT/on.log"
grep -h "wrong elements" "$OUT"/on.log "$OUT"/off.log
el done
} >"$OUT/cep2p3.txt" 2>&1
cat "$OUT/cep2p3.txt"
