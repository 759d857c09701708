#!/usr/bin/env bash
# Call 12 (2026-11-27, twenty-third session, 4×H100 `nvidia-h100-x4`): the split Reduce whose root
# keeps its input (the owners sum the other ranks' chunks, the root adds its own as it reads the
# sums: ReduceSplitLL, ReduceSplitHB; staged, PostDiv) against the previous build (HEAD afdc2a3,
# .gpuz/old.so) and NCCL (first and last), float 1 – 512 MB by 2, 4 and 3 ranks, alternated twice;
# then every element checked: bfloat16 in place at roots 3 / 1, max and premulsum (a scalar per
# rank) in float, Avg of int32 and float (weft bench), 1 – 64 MB, and PyTorch's reduce checks
# (examples/torch/dropin_check.py: sum and max, int64 and bfloat16 included, to 16 MB).
# Build: make gpu-bundle-four; the afdc2a3 library as .gpuz/old.so; carry .gpuz.
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
run() { local n=$1; shift; timeout 120 "$@" >"$OUT/logs/$n.log" 2>&1; echo "$n rc=$? $(grep -h 'wrong elements' "$OUT/logs/$n.log" | tail -n 1)"; }
{
make -B -C examples/cbench CFLAGS='-O2 -Wall' >/dev/null 2>&1 || make -B -C examples/cbench CFLAGS='-O2 -Wall' OMP= >/dev/null
for g in 4 3; do
  el "$g ranks Reduce float 1 - 512 MB"
  S=(-g $g -t reduce -d float -b 1M -e 512M -f 2 -w 3 -n 10 -G 5 -c 1 -p 0)
  run g$g-nccl "${R[@]}" $CB "${S[@]}"
  run g$g-old "${O[@]}" $CB "${S[@]}"
  run g$g-new "${W[@]}" $CB "${S[@]}"
  run g$g-old2 "${O[@]}" $CB "${S[@]}"
  run g$g-new2 "${W[@]}" $CB "${S[@]}"
  run g$g-nccl2 "${R[@]}" $CB "${S[@]}"
done
el "checks: bfloat16 in place, max, premulsum"
run bf4 "${W[@]}" $CB -g 4 -t reduce -d bfloat16 -r 3 -b 1M -e 64M -f 4 -w 1 -n 2 -G 0 -c 1 -p 1
run bf3 "${W[@]}" $CB -g 3 -t reduce -d bfloat16 -r 1 -b 1M -e 64M -f 4 -w 1 -n 2 -G 0 -c 1 -p 1
run max4 "${W[@]}" $CB -g 4 -t reduce -d float -o max -r 2 -b 1M -e 64M -f 4 -w 1 -n 2 -G 0 -c 1 -p 1
run pm4 "${W[@]}" $CB -g 4 -t reduce -d float -o premulsum -r 1 -b 1M -e 64M -f 4 -w 1 -n 2 -G 0 -c 1 -p 1
el "Avg (int32: the root's division, PostDiv; float: run as PreMulSum) through weft bench, 4 and 3 ranks"
for g in 4 3; do
  for d in int32 float; do
    timeout 60 $B/weft run --nproc $g -- $B/weft bench reduce --hal nvlink -o avg -d $d -r 1 -b 1M -e 64M -f 4 -w 1 -n 2 >"$OUT/logs/avg$g-$d.log" 2>&1
    echo "avg$g-$d rc=$? rows $(grep -cE '^ +[0-9]' "$OUT/logs/avg$g-$d.log"), wrong $(awk '$1 ~ /^[0-9]+$/ {w += $9 + $13} END {print w + 0}' "$OUT/logs/avg$g-$d.log")"
  done
done
el "PyTorch reduce checks (sum and max at roots 0 and n-1), 4 ranks"
WEFT_NCCL_FALLBACK=0 LD_PRELOAD=$PWD/$B/libweft_nccl.so timeout 150 torchrun --nproc-per-node 4 --master-port 29611 examples/torch/dropin_check.py --no-graph --only '^reduce\.' --sizes 1,262147,2097153,4194307 --large 0 --quiet >"$OUT/logs/torch.log" 2>&1
echo "torch rc=$? $(tail -n 1 "$OUT/logs/torch.log")"
el ratios
for g in 4 3; do
  python3 scripts/cbench-ratios.py "$OUT"/logs/g$g-nccl.log "$OUT"/logs/g$g-nccl2.log "$OUT"/logs/g$g-old.log "$OUT"/logs/g$g-new.log "$OUT"/logs/g$g-old2.log "$OUT"/logs/g$g-new2.log
done
grep -H -i "error\|fail\|timeout" "$OUT"/logs/*.log | grep -v "0 failed" | head -20
el done
} >"$OUT/reduce.txt" 2>&1
tar -czf "$OUT/logs.tar.gz" -C "$OUT" logs && rm -rf "$OUT/logs"
cat "$OUT/reduce.txt"
