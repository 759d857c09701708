#!/usr/bin/env bash
# Call 6 (2026-11-27, sixteenth session, 2×H100): every collective at 64 MB, 256 MB and 1 GB through
# the C ABI beside NCCL with this session's final defaults (copy-engine point-to-point, Broadcast
# and AllToAll from 64 MiB / 256 MiB, copy-engine Reduce from 64 MiB), float and bfloat16, as the
# acceptance's cbench steps run them (-g 2, CUDA graphs, out of place, every element checked).
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
for d in float bfloat16; do
  A=(-g 2 -d $d -b 64M -e 1G -f 4 -w 5 -n 20 -G 10 -c 1 -p 0)
  el "$d nccl"; timeout 80 "${R[@]}" $CB "${A[@]}" >"$OUT/nccl-$d.log" 2>&1; echo rc=$?
  el "$d weft"; timeout 80 "${W[@]}" $CB "${A[@]}" >"$OUT/weft-$d.log" 2>&1; echo rc=$?
  python3 scripts/cbench-ratios.py "$OUT/nccl-$d.log" "$OUT/weft-$d.log"
done
grep -h "wrong elements" "$OUT"/*.log | sort | uniq -c
el done
} >"$OUT/large6.txt" 2>&1
cat "$OUT/large6.txt"
