#!/usr/bin/env bash
# Call 6 (2026-11-27, eighteenth session, 4×H100 `nvidia-h100-x4`): the split plans with their own
# shape (half the rooted shape's blocks per group: 64 × 512) from 4 MiB, the all-pairs windowed
# plans below, against NCCL 2.28.3 on 4 and 3 ranks (float, bfloat16, root 3 in place); then the
# HB shape of AllGather/AllToAll/ReduceScatter/AllReduce on 4 ranks, 32x1024 (default) against
# 64x512, alternated twice. CUDA graphs, every element checked.
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
for d in float bfloat16; do
  A=(-g 4 -t broadcast,reduce -d $d -b 8 -e 512M -f 4 -w 3 -n 10 -G 10 -c 1 -p 0)
  el "4 ranks $d"
  run nccl-$d "${R[@]}" $CB "${A[@]}"
  run weft-$d "${W[@]}" $CB "${A[@]}"
done
A=(-g 4 -t broadcast,reduce -d float -b 1G -e 1G -w 3 -n 10 -G 10 -c 1 -p 0)
run nccl-1g "${R[@]}" $CB "${A[@]}"
run weft-1g "${W[@]}" $CB "${A[@]}"
A=(-g 4 -t broadcast,reduce -d bfloat16 -r 3 -b 1M -e 256M -f 16 -w 3 -n 10 -G 10 -c 1 -p 1)
run nccl-r3ip "${R[@]}" $CB "${A[@]}"
run weft-r3ip "${W[@]}" $CB "${A[@]}"
A=(-g 3 -t broadcast,reduce -d float -b 512K -e 512M -f 4 -w 3 -n 10 -G 10 -c 1 -p 0)
run nccl-n3 "${R[@]}" $CB "${A[@]}"
run weft-n3 "${W[@]}" $CB "${A[@]}"
A=(-g 4 -t allgather,alltoall,reducescatter,allreduce -d float -b 512K -e 512M -f 4 -w 3 -n 10 -G 10 -c 1 -p 0)
el "HB shape"
for rep in 1 2; do
  run c-nccl$rep "${R[@]}" $CB "${A[@]}"
  run c-def$rep "${W[@]}" $CB "${A[@]}"
  run c-64x512-$rep "${W[@]}" WEFT_HB_SHAPE=64x512 $CB "${A[@]}"
done
el ratios
for s in float bfloat16 1g r3ip n3; do python3 scripts/cbench-ratios.py "$OUT/logs/nccl-$s.log" "$OUT/logs/weft-$s.log"; done
for rep in 1 2; do python3 scripts/cbench-ratios.py "$OUT/logs/c-nccl$rep.log" "$OUT/logs/c-def$rep.log" "$OUT/logs/c-64x512-$rep.log"; done
grep -H "wrong elements" "$OUT"/logs/*.log | grep -v " 0 wrong" ; grep -c "0 wrong elements" "$OUT"/logs/*.log | tr '\n' ' '
el done
} >"$OUT/split2.txt" 2>&1
tar -czf "$OUT/logs.tar.gz" -C "$OUT" logs && rm -rf "$OUT/logs"
cat "$OUT/split2.txt"
