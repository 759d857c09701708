#!/usr/bin/env bash
# Call 11 (2026-11-27, twenty-third session, 4×H100): the split LL Broadcast and Reduce (3–8 MB on
# 4 ranks: Reduce 0.77–0.94× NCCL in call 10) in other shapes, WEFT_WIDE_LL_SHAPE (every wide LL
# plan; only the split LL plans serve Broadcast and Reduce at these sizes), float, NCCL first and
# last, each shape twice. Build: make gpu-bundle-four; carry .gpuz.
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
sw() { local n=$1; shift; : >"$OUT/logs/$n.log"; for b in 3M 4M; do timeout 60 "$@" $CB -g 4 -t broadcast,reduce -d float -b $b -e $(( $(numfmt --from=iec $b) * 2 )) -f 2 -w 5 -n 30 -G 10 -c 1 -p 0 >>"$OUT/logs/$n.log" 2>&1; done; }
{
make -B -C examples/cbench CFLAGS='-O2 -Wall' >/dev/null 2>&1 || make -B -C examples/cbench CFLAGS='-O2 -Wall' OMP= >/dev/null
sw nccl "${R[@]}"
for rep in 1 2; do
  for sh in default 160x512 192x512 256x512 96x1024 64x1024; do
    el "$sh $rep"
    if [ $sh = default ]; then sw $sh-$rep "${W[@]}"; else sw $sh-$rep "${W[@]}" WEFT_WIDE_LL_SHAPE=$sh; fi
  done
done
sw nccl2 "${R[@]}"
el ratios
cd "$OUT/logs" && python3 "$OLDPWD/scripts/cbench-ratios.py" nccl.log nccl2.log default-*.log 1*.log 2*.log 9*.log 6*.log; cd "$OLDPWD"
grep -H "wrong elements" "$OUT"/logs/*.log | grep -v " 0 wrong"
grep -H -i "error\|fail\|timeout" "$OUT"/logs/*.log | head -20
el done
} >"$OUT/splitll.txt" 2>&1
tar -czf "$OUT/logs.tar.gz" -C "$OUT" logs && rm -rf "$OUT/logs"
cat "$OUT/splitll.txt"
