#!/usr/bin/env bash
# Call 7 (2026-11-27, eighteenth session, 4×H100 `nvidia-h100-x4`): every collective on 4 ranks
# with the split Broadcast/Reduce and the two-group plans on 64 × 512 (PairHB), beside NCCL 2.28.3:
# float 8 B - 512 MB by 4, 1 GB, bfloat16 from 512 KB; then the split plans' depth and window
# through WEFT_ROOTED_SHAPE (split = half its blocks per group). CUDA graphs, every element checked.
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
run() { local n=$1; shift; timeout 90 "$@" >"$OUT/logs/$n.log" 2>&1; echo "$n rc=$?"; }
{
make -B -C examples/cbench CFLAGS='-O2 -Wall' >/dev/null 2>&1 || make -B -C examples/cbench CFLAGS='-O2 -Wall' OMP= >/dev/null
A=(-g 4 -d float -b 8 -e 512M -f 4 -w 3 -n 10 -G 10 -c 1 -p 0)
el "float"
run nccl-float "${R[@]}" $CB "${A[@]}"
run weft-float "${W[@]}" $CB "${A[@]}"
A=(-g 4 -d bfloat16 -b 512K -e 512M -f 4 -w 3 -n 10 -G 10 -c 1 -p 0)
run nccl-bfloat16 "${R[@]}" $CB "${A[@]}"
run weft-bfloat16 "${W[@]}" $CB "${A[@]}"
A=(-g 4 -d float -b 1G -e 1G -w 3 -n 10 -G 10 -c 1 -p 0)
run nccl-1g "${R[@]}" $CB "${A[@]}"
run weft-1g "${W[@]}" $CB "${A[@]}"
el "split variants"
A=(-g 4 -t broadcast,reduce -d float -b 8M -e 512M -f 4 -w 3 -n 10 -G 10 -c 1 -p 0)
run s-def "${W[@]}" $CB "${A[@]}"
run s-d4 "${W[@]}" WEFT_ROOTED_SHAPE=128x512w8Md4 $CB "${A[@]}"
run s-w16M "${W[@]}" WEFT_ROOTED_SHAPE=128x512w16M $CB "${A[@]}"
run s-w4Md4 "${W[@]}" WEFT_ROOTED_SHAPE=128x512w4Md4 $CB "${A[@]}"
run s-160 "${W[@]}" WEFT_ROOTED_SHAPE=160x512 $CB "${A[@]}"
el ratios
for s in float bfloat16 1g; do python3 scripts/cbench-ratios.py "$OUT/logs/nccl-$s.log" "$OUT/logs/weft-$s.log"; done
python3 scripts/cbench-ratios.py "$OUT/logs/nccl-float.log" "$OUT"/logs/s-*.log
grep -H "wrong elements" "$OUT"/logs/*.log | grep -v " 0 wrong"; grep -c " 0 wrong elements" "$OUT"/logs/*.log | tr '\n' ' '
el done
} >"$OUT/four3.txt" 2>&1
tar -czf "$OUT/logs.tar.gz" -C "$OUT" logs && rm -rf "$OUT/logs"
cat "$OUT/four3.txt"
