#!/usr/bin/env bash
# Call 2 (2026-11-27, nineteenth session, 4×H100 `nvidia-h100-x4`): where 4 ranks trail NCCL after
# call 1 — Broadcast/Reduce 512 KB - 32 MB (0.57-0.84x: a chunk under one window is one window, so
# the split plans' two hops run one after the other), AllReduce 512 KB - 8 MB (0.84-0.94), AllToAll
# and AllReduce 32 - 512 MB (0.74-0.93) — against pipelining from smaller chunks
# (WEFT_ROOTED_SHAPE ...p4@SIZE, Shape.PipelineFrom), the split bound (WEFT_ROOTED_SPLIT_MIN_BYTES)
# and smaller or larger windows (WEFT_HB_SHAPE), float, twice alternated, NCCL in the same call.
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
M=(-g 4 -d float -b 512K -e 32M -f 2 -w 3 -n 10 -G 10 -c 1 -p 0)
L=(-g 4 -d float -b 32M -e 512M -f 4 -w 3 -n 10 -G 10 -c 1 -p 0)
for rep in 1 2; do
  el "rep $rep: mid sizes"
  run a-nccl$rep "${R[@]}" $CB -t allreduce,broadcast,reduce "${M[@]}"
  run a-def$rep "${W[@]}" $CB -t allreduce,broadcast,reduce "${M[@]}"
  run r-p4f512K-$rep "${W[@]}" WEFT_ROOTED_SHAPE=128x512p4@512K $CB -t broadcast,reduce "${M[@]}"
  run r-p4f256K-$rep "${W[@]}" WEFT_ROOTED_SHAPE=128x512p4@256K $CB -t broadcast,reduce "${M[@]}"
  run r-p8f1M-$rep "${W[@]}" WEFT_ROOTED_SHAPE=128x512p8@1M $CB -t broadcast,reduce "${M[@]}"
  run r-p4f512K-s1M-$rep "${W[@]}" WEFT_ROOTED_SHAPE=128x512p4@512K WEFT_ROOTED_SPLIT_MIN_BYTES=1M $CB -t broadcast,reduce "${M[@]}"
  run r-p4f256K-s512K-$rep "${W[@]}" WEFT_ROOTED_SHAPE=128x512p4@256K WEFT_ROOTED_SPLIT_MIN_BYTES=512K $CB -t broadcast,reduce "${M[@]}"
  run r-p4f512K-s2M-$rep "${W[@]}" WEFT_ROOTED_SHAPE=128x512p4@512K WEFT_ROOTED_SPLIT_MIN_BYTES=2M $CB -t broadcast,reduce "${M[@]}"
  run h-w64K-$rep "${W[@]}" WEFT_HB_SHAPE=32x1024w64K $CB -t allreduce "${M[@]}"
  run h-w128K-$rep "${W[@]}" WEFT_HB_SHAPE=32x1024w128K $CB -t allreduce "${M[@]}"
  run h-w256K-$rep "${W[@]}" WEFT_HB_SHAPE=32x1024w256K $CB -t allreduce "${M[@]}"
  run h-w512K-$rep "${W[@]}" WEFT_HB_SHAPE=32x1024w512K $CB -t allreduce "${M[@]}"
  el "rep $rep: large sizes"
  run l-nccl$rep "${R[@]}" $CB -t allreduce,alltoall "${L[@]}"
  run l-def$rep "${W[@]}" $CB -t allreduce,alltoall "${L[@]}"
  run l-64x512w16M-$rep "${W[@]}" WEFT_HB_SHAPE=64x512w16M $CB -t allreduce,alltoall "${L[@]}"
  run l-64x512w4M-$rep "${W[@]}" WEFT_HB_SHAPE=64x512w4M $CB -t allreduce,alltoall "${L[@]}"
  run l-32x1024w16M-$rep "${W[@]}" WEFT_HB_SHAPE=32x1024w16M $CB -t allreduce,alltoall "${L[@]}"
  run l-48x1024-$rep "${W[@]}" WEFT_HB_SHAPE=48x1024 $CB -t allreduce "${L[@]}"
done
el ratios
for rep in 1 2; do
  python3 scripts/cbench-ratios.py "$OUT/logs/a-nccl$rep.log" "$OUT"/logs/[rh]-*-$rep.log "$OUT/logs/a-def$rep.log"
  python3 scripts/cbench-ratios.py "$OUT/logs/l-nccl$rep.log" "$OUT"/logs/l-[0-9]*-$rep.log "$OUT/logs/l-def$rep.log"
done
grep -H "wrong elements" "$OUT"/logs/*.log | grep -v " 0 wrong"; grep -c " 0 wrong elements" "$OUT"/logs/*.log | tr '\n' ' '
el done
} >"$OUT/mid.txt" 2>&1
tar -czf "$OUT/logs.tar.gz" -C "$OUT" logs && rm -rf "$OUT/logs"
cat "$OUT/mid.txt"
