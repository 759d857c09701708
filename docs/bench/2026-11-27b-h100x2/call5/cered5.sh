#!/usr/bin/env bash
# Call 5 (2026-11-27, sixteenth session, 2×H100): the copy-engine Reduce's reduction kernel shape
# (WEFT_CE_ALLREDUCE_SHAPE's blocks and threads, which it shares) at 256 MB - 1 GB, float, beside
# NCCL; and its bound: 16 - 64 MB with the executor off and on from 16M.
set -u
T0=$(date +%s)
tar -xzf .gpuz/bundle.tgz
export NCCL_NVLS_ENABLE=0; unset WEFT_NVLS
B=.gpu; CB=examples/cbench/cbench
W=(env LD_PRELOAD=$PWD/$B/libweft_nccl.so WEFT_NCCL_FALLBACK=0 WEFT_DEBUG=WARN WEFT_CE_REDUCE_MIN_BYTES=16M)
R=(env -u LD_PRELOAD NCCL_DEBUG=WARN)
mkdir -p "$OUT"
el() { echo "== $(( $(date +%s) - T0 )) s: $*"; }
{
make -B -C examples/cbench CFLAGS='-O2 -Wall' >/dev/null 2>&1 || make -B -C examples/cbench CFLAGS='-O2 -Wall' OMP= >/dev/null
A=(-g 2 -t reduce -d float -b 256M -e 1G -f 2 -w 5 -n 20 -G 10 -c 1 -p 0)
el nccl; timeout 60 "${R[@]}" $CB "${A[@]}" >"$OUT/nccl.log" 2>&1; echo rc=$?
for sh in 32x512 64x512 128x512 64x1024; do
  el "$sh"; timeout 60 "${W[@]}" WEFT_CE_ALLREDUCE_SHAPE=${sh}w64Md2 $CB "${A[@]}" >"$OUT/s$sh.log" 2>&1; echo rc=$?
done
python3 scripts/cbench-ratios.py "$OUT/nccl.log" "$OUT"/s*.log
S=(-g 2 -t reduce -d float -b 16M -e 64M -f 2 -w 5 -n 20 -G 10 -c 1 -p 0)
el small-nccl; timeout 60 "${R[@]}" $CB "${S[@]}" >"$OUT/small-nccl.log" 2>&1
el small-off; timeout 60 "${W[@]}" WEFT_CE_REDUCE_MIN_BYTES=0 $CB "${S[@]}" >"$OUT/small-off.log" 2>&1
el small-on; timeout 60 "${W[@]}" $CB "${S[@]}" >"$OUT/small-on.log" 2>&1
python3 scripts/cbench-ratios.py "$OUT/small-nccl.log" "$OUT/small-off.log" "$OUT/small-on.log"
grep -h "wrong elements" "$OUT"/*.log | sort | uniq -c
el done
} >"$OUT/cered5.txt" 2>&1
cat "$OUT/cered5.txt"
