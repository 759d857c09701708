#!/usr/bin/env bash
# Call 7 (2026-11-27, nineteenth session, 4×H100 `nvidia-h100-x4`): Broadcast and Reduce of
# 8 B - 512 KB on 4 ranks, three alternations of NCCL and the final build, to tell call 6's slow
# Broadcast at 128 B - 2 KB (6.1-6.5 µs against 4.0 in call 4) from a regression.
set -u
T0=$(date +%s)
tar -xzf .gpuz/bundle.tgz
export NCCL_NVLS_ENABLE=0; unset WEFT_NVLS
export WEFT_REQUIRE=nvlink
B=.gpu; CB=examples/cbench/cbench
W=(env LD_PRELOAD=$PWD/$B/libweft_nccl.so WEFT_NCCL_FALLBACK=0 WEFT_DEBUG=WARN)
R=(env -u LD_PRELOAD NCCL_DEBUG=WARN)
mkdir -p "$OUT/logs"
el() { echo "== $(( $(date +%s) - T0 )) s: $*"; }
run() { local n=$1; shift; timeout 60 "$@" >"$OUT/logs/$n.log" 2>&1; echo "$n rc=$?"; }
{
make -B -C examples/cbench CFLAGS='-O2 -Wall' >/dev/null 2>&1 || make -B -C examples/cbench CFLAGS='-O2 -Wall' OMP= >/dev/null
A=(-g 4 -t broadcast,reduce -d float -b 8 -e 512K -f 4 -w 5 -n 20 -G 10 -c 1 -p 0)
for rep in 1 2 3; do
  el "rep $rep"
  run nccl$rep "${R[@]}" $CB "${A[@]}"
  run weft$rep "${W[@]}" $CB "${A[@]}"
done
el ratios
for rep in 1 2 3; do python3 scripts/cbench-ratios.py "$OUT/logs/nccl$rep.log" "$OUT/logs/weft$rep.log"; done
grep -H "wrong elements" "$OUT"/logs/*.log | grep -v " 0 wrong"; grep -c " 0 wrong elements" "$OUT"/logs/*.log | tr '\n' ' '
el done
} >"$OUT/rooted.txt" 2>&1
tar -czf "$OUT/logs.tar.gz" -C "$OUT" logs && rm -rf "$OUT/logs"
cat "$OUT/rooted.txt"
