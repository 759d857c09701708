#!/usr/bin/env bash
# Call 9 (2026-11-27, twenty-second session, 4×H100 `nvidia-h100-x4`): the split Reduce's first hop
# as one group per owner on every rank (call 8 did the Broadcast root), each group cut to
# RootedHB.Blocks / n blocks (32 on 4 ranks, 42 on 3) so the root holds no more than 128 — against HEAD
# f834c84 (.gpuz/old.so), NCCL first and last, Reduce 4 MB – 512 MB on 4 and 3 ranks, two alternations; bfloat16 in
# place, root 2, 8 B – 64 MB.
# Build: make gpu-bundle-four; the HEAD library as .gpuz/old.so; carry .gpuz.
set -u
T0=$(date +%s)
tar -xzf .gpuz/bundle.tgz
export NCCL_NVLS_ENABLE=0; unset WEFT_NVLS
export WEFT_REQUIRE=nvlink
B=.gpu; CB=examples/cbench/cbench
W=(env LD_PRELOAD=$PWD/$B/libweft_nccl.so WEFT_NCCL_FALLBACK=0 WEFT_DEBUG=WARN)
O=(env LD_PRELOAD=$PWD/.gpuz/old.so WEFT_NCCL_FALLBACK=0 WEFT_DEBUG=WARN)
R=(env -u LD_PRELOAD NCCL_DEBUG=WARN)
mkdir -p "$OUT/logs"
el() { echo "== $(( $(date +%s) - T0 )) s: $*"; }
run() { local n=$1; shift; timeout 150 "$@" >"$OUT/logs/$n.log" 2>&1; echo "$n rc=$? $(grep -c ' 0 wrong' "$OUT/logs/$n.log") ok lines"; }
{
make -B -C examples/cbench CFLAGS='-O2 -Wall' >/dev/null 2>&1 || make -B -C examples/cbench CFLAGS='-O2 -Wall' OMP= >/dev/null
for g in 4 3; do
  el "$g ranks reduce 4 MB - 512 MB"
  S=(-g $g -t reduce -d float -b 4M -e 512M -f 2 -w 3 -n 10 -G 10 -c 1 -p 0)
  run g$g-nccl "${R[@]}" $CB "${S[@]}"
  run g$g-old "${O[@]}" $CB "${S[@]}"
  run g$g-new "${W[@]}" $CB "${S[@]}"
  run g$g-old2 "${O[@]}" $CB "${S[@]}"
  run g$g-new2 "${W[@]}" $CB "${S[@]}"
  run g$g-nccl2 "${R[@]}" $CB "${S[@]}"
done
el "bfloat16 in place root 2, 4 and 3 ranks"
run bf4 "${W[@]}" $CB -g 4 -t reduce -d bfloat16 -r 2 -b 8 -e 64M -f 4 -w 2 -n 3 -G 3 -c 1 -p 1
run bf3 "${W[@]}" $CB -g 3 -t reduce -d bfloat16 -r 2 -b 8 -e 64M -f 4 -w 2 -n 3 -G 3 -c 1 -p 1
el ratios
for g in 4 3; do
  python3 scripts/cbench-ratios.py "$OUT"/logs/g$g-nccl.log "$OUT"/logs/g$g-nccl2.log "$OUT"/logs/g$g-old.log "$OUT"/logs/g$g-new.log "$OUT"/logs/g$g-old2.log "$OUT"/logs/g$g-new2.log
done
grep -H "wrong elements" "$OUT"/logs/*.log | grep -v " 0 wrong"
grep -H -i "error\|fail\|timeout\|resident" "$OUT"/logs/*.log | head -20
el done
} >"$OUT/reduce.txt" 2>&1
tar -czf "$OUT/logs.tar.gz" -C "$OUT" logs && rm -rf "$OUT/logs"
cat "$OUT/reduce.txt"
