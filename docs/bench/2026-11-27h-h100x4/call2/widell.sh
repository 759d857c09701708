#!/usr/bin/env bash
# Call 2 (2026-11-27, twenty-second session, 4×H100 `nvidia-h100-x4`): the wide LL plans' shape
# (WEFT_WIDE_LL_SHAPE) on 4 and 3 ranks — call 1 found the two-phase LL AllReduce at 1–4 MB
# 1.09–1.06 × NCCL with 32 × 1024 and 1.47–1.58 with 128 × 512.
#  A. AllReduce 256 KB – 16 MB, two-phase LL up to 16 MiB (WEFT_ALLREDUCE_LL2_MAX_BYTES), six shapes;
#  B. AllGather, ReduceScatter, AllToAll, Broadcast, Reduce 64 KB – 4 MB at their default LL
#     bounds, four shapes.
# NCCL first and last. Build: make gpu-bundle-four (this session's rotated puts); carry .gpuz.
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
run() { local n=$1; shift; timeout 120 "$@" >"$OUT/logs/$n.log" 2>&1; echo "$n rc=$? $(grep -c ' 0 wrong' "$OUT/logs/$n.log") ok lines"; }
{
make -B -C examples/cbench CFLAGS='-O2 -Wall' >/dev/null 2>&1 || make -B -C examples/cbench CFLAGS='-O2 -Wall' OMP= >/dev/null
for g in 4 3; do
  el "$g ranks: A. AllReduce 256 KB - 16 MB"
  S=(-g $g -t allreduce -d float -b 256K -e 16M -f 2 -w 3 -n 20 -G 10 -c 1 -p 0)
  run a$g-nccl "${R[@]}" $CB "${S[@]}"
  run a$g-def "${W[@]}" $CB "${S[@]}"
  for sh in 64x512 96x512 128x512 96x1024 128x1024 132x256; do
    run a$g-$sh "${W[@]}" WEFT_ALLREDUCE_LL2_MAX_BYTES=16M WEFT_WIDE_LL_SHAPE=$sh $CB "${S[@]}"
  done
  run a$g-nccl2 "${R[@]}" $CB "${S[@]}"
  el "$g ranks: B. other collectives 64 KB - 4 MB"
  S=(-g $g -t allgather,reducescatter,alltoall,broadcast,reduce -d float -b 64K -e 4M -f 2 -w 3 -n 20 -G 10 -c 1 -p 0)
  run b$g-nccl "${R[@]}" $CB "${S[@]}"
  run b$g-def "${W[@]}" $CB "${S[@]}"
  for sh in 64x512 128x512 96x1024; do
    run b$g-$sh "${W[@]}" WEFT_WIDE_LL_SHAPE=$sh $CB "${S[@]}"
  done
  run b$g-nccl2 "${R[@]}" $CB "${S[@]}"
done
el ratios
for g in 4 3; do
  python3 scripts/cbench-ratios.py "$OUT"/logs/a$g-nccl.log "$OUT"/logs/a$g-nccl2.log "$OUT"/logs/a$g-def.log "$OUT"/logs/a$g-[0-9]*.log
  python3 scripts/cbench-ratios.py "$OUT"/logs/b$g-nccl.log "$OUT"/logs/b$g-nccl2.log "$OUT"/logs/b$g-def.log "$OUT"/logs/b$g-[0-9]*.log
done
grep -H "wrong elements" "$OUT"/logs/*.log | grep -v " 0 wrong"
grep -H -i "error\|fail\|timeout\|resident" "$OUT"/logs/*.log | head -20
el done
} >"$OUT/widell.txt" 2>&1
tar -czf "$OUT/logs.tar.gz" -C "$OUT" logs && rm -rf "$OUT/logs"
cat "$OUT/widell.txt"
