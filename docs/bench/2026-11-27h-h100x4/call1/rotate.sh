#!/usr/bin/env bash
# Call 1 (2026-11-27, twenty-second session, 4×H100 `nvidia-h100-x4`):
#  1. conformance device/ on 4 ranks (the residency case of device/bad-input, first run on a GPU);
#  2. puts in rotated peer order (rank+1, rank+2, … instead of ascending) in the windowed
#     all-pairs plans and the split Reduce, against the previous build (HEAD 423df11,
#     .gpuz/old.so) and NCCL twice, 4 and 3 ranks, 2 MB – 512 MB;
#  3. the wide LL shape for the two-phase LL AllReduce up to 8 MiB on 4 ranks.
# Build: make gpu-bundle-four; cp the 423df11 library to .gpuz/old.so; carry .gpuz.
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
el "conformance device/ 4 ranks"
timeout 200 $B/weft conformance --hal nvlink --ranks 4 --run device/ >"$OUT/logs/conformance.log" 2>&1; echo "conformance rc=$?"
tail -15 "$OUT/logs/conformance.log"
C=allreduce,reducescatter,alltoall,reduce,broadcast
for g in 4 3; do
  S=(-g $g -t $C -d float -b 2M -e 512M -f 4 -w 3 -n 10 -G 10 -c 1 -p 0)
  el "$g ranks float 2 MB - 512 MB"
  run g$g-nccl "${R[@]}" $CB "${S[@]}"
  run g$g-old "${O[@]}" $CB "${S[@]}"
  run g$g-new "${W[@]}" $CB "${S[@]}"
  run g$g-old2 "${O[@]}" $CB "${S[@]}"
  run g$g-new2 "${W[@]}" $CB "${S[@]}"
  run g$g-nccl2 "${R[@]}" $CB "${S[@]}"
done
el "4 ranks AllReduce 1-8 MB, two-phase LL to 8 MiB, wide LL shapes"
S=(-g 4 -t allreduce -d float -b 1M -e 8M -f 2 -w 3 -n 20 -G 10 -c 1 -p 0)
run ar-nccl "${R[@]}" $CB "${S[@]}"
run ar-def "${W[@]}" $CB "${S[@]}"
for sh in 32x1024 48x1024 64x1024 96x1024 128x512 64x512; do
  run ar-$sh "${W[@]}" WEFT_ALLREDUCE_LL2_MAX_BYTES=8M WEFT_WIDE_LL_SHAPE=$sh $CB "${S[@]}"
done
run ar-nccl2 "${R[@]}" $CB "${S[@]}"
el ratios
for g in 4 3; do
  python3 scripts/cbench-ratios.py "$OUT"/logs/g$g-nccl.log "$OUT"/logs/g$g-nccl2.log "$OUT"/logs/g$g-old.log "$OUT"/logs/g$g-new.log "$OUT"/logs/g$g-old2.log "$OUT"/logs/g$g-new2.log
done
python3 scripts/cbench-ratios.py "$OUT"/logs/ar-nccl.log "$OUT"/logs/ar-nccl2.log "$OUT"/logs/ar-def.log "$OUT"/logs/ar-[0-9]*.log
grep -H "wrong elements" "$OUT"/logs/*.log | grep -v " 0 wrong"
grep -H -i "error\|fail\|timeout" "$OUT"/logs/g*.log "$OUT"/logs/ar*.log | head -20
el done
} >"$OUT/rotate.txt" 2>&1
tar -czf "$OUT/logs.tar.gz" -C "$OUT" logs && rm -rf "$OUT/logs"
cat "$OUT/rotate.txt"
