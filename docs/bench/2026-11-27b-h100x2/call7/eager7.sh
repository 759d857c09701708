#!/usr/bin/env bash
# Call 7 (2026-11-27, sixteenth session, 2×H100): the copy-engine point-to-point path without CUDA
# graphs (-G 0), where every call pays the host-side exchange: time per call and the host
# microseconds per enqueue (-H 1, the last column), sendrecv and gather at 64 MB - 1 GB, float,
# beside NCCL, weft off and on.
set -u
T0=$(date +%s)
tar -xzf .gpuz/bundle.tgz
export NCCL_NVLS_ENABLE=0; unset WEFT_NVLS
B=.gpu; CB=examples/cbench/cbench
W=(env LD_PRELOAD=$PWD/$B/libweft_nccl.so WEFT_NCCL_FALLBACK=0 WEFT_DEBUG=WARN)
R=(env -u LD_PRELOAD NCCL_DEBUG=WARN)
mkdir -p "$OUT"
el() { echo "== $(( $(date +%s) - T0 )) s: $*"; }
{
make -B -C examples/cbench CFLAGS='-O2 -Wall' >/dev/null 2>&1 || make -B -C examples/cbench CFLAGS='-O2 -Wall' OMP= >/dev/null
A=(-g 2 -t sendrecv,gather -d float -b 64M -e 1G -f 4 -w 5 -n 20 -G 0 -c 1 -p 0 -H 1)
el nccl; timeout 60 "${R[@]}" $CB "${A[@]}" >"$OUT/nccl.log" 2>&1; echo rc=$?
el off;  timeout 60 "${W[@]}" WEFT_CE_P2P_MIN_BYTES=0 $CB "${A[@]}" >"$OUT/off.log" 2>&1; echo rc=$?
el on;   timeout 60 "${W[@]}" $CB "${A[@]}" >"$OUT/on.log" 2>&1; echo rc=$?
python3 scripts/cbench-ratios.py "$OUT/nccl.log" "$OUT/off.log" "$OUT/on.log"
for f in nccl off on; do echo "-- $f (size, time us, host us per enqueue)"; grep -E "^ +[0-9]" "$OUT/$f.log" | tr -s " " | cut -d" " -f2,7,15; done
grep -h "wrong elements" "$OUT"/*.log
el done
} >"$OUT/eager7.txt" 2>&1
cat "$OUT/eager7.txt"
