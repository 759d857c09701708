#!/usr/bin/env bash
# Call 13 (2026-11-27, twenty-third session, 4×H100): the split windowed Broadcast and Reduce in
# other shapes (WEFT_ROOTED_SHAPE; default 128x512, u4, 4 MiB windows, depth 4, halved into two
# groups by Config.split) now that the Reduce's root only reads (call 12), 4 ranks, float 8 – 512 MB,
# NCCL first and last, each shape twice. Build: make gpu-bundle-four (HEAD 36ebbd8); carry .gpuz.
set -u
T0=$(date +%s)
tar -xzf .gpuz/bundle.tgz
export NCCL_NVLS_ENABLE=0; unset WEFT_NVLS
export WEFT_REQUIRE=nvlink
B=.gpu; CB=examples/cbench/cbench
W=(env LD_PRELOAD=$PWD/$B/libweft_nccl.so WEFT_NCCL_FALLBACK=0 WEFT_DEBUG=WARN)
R=(env -u LD_PRELOAD NCCL_DEBUG=WARN)
S=(-g 4 -t broadcast,reduce -d float -b 8M -e 512M -f 2 -w 3 -n 10 -G 5 -c 1 -p 0)
mkdir -p "$OUT/logs"
el() { echo "== $(( $(date +%s) - T0 )) s: $*"; }
{
make -B -C examples/cbench CFLAGS='-O2 -Wall' >/dev/null 2>&1 || make -B -C examples/cbench CFLAGS='-O2 -Wall' OMP= >/dev/null
timeout 100 "${R[@]}" $CB "${S[@]}" >"$OUT/logs/nccl.log" 2>&1
for rep in 1 2; do
  for sh in default 192x512 256x512 128x1024 128x512w8M 128x512w2M; do
    el "$sh $rep"
    if [ $sh = default ]; then E=(); else E=(WEFT_ROOTED_SHAPE=$sh); fi
    timeout 100 "${W[@]}" "${E[@]}" $CB "${S[@]}" >"$OUT/logs/$sh-$rep.log" 2>&1
    echo "$sh-$rep rc=$? $(grep -h 'wrong elements' "$OUT/logs/$sh-$rep.log" | tail -n 1)"
  done
done
timeout 100 "${R[@]}" $CB "${S[@]}" >"$OUT/logs/nccl2.log" 2>&1
el ratios
cd "$OUT/logs" && python3 "$OLDPWD/scripts/cbench-ratios.py" nccl.log nccl2.log default-*.log 1*.log 2*.log; cd "$OLDPWD"
grep -H -i "error\|fail\|timeout" "$OUT"/logs/*.log | head -20
el done
} >"$OUT/rooted.txt" 2>&1
tar -czf "$OUT/logs.tar.gz" -C "$OUT" logs && rm -rf "$OUT/logs"
cat "$OUT/rooted.txt"
