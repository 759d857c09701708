#!/usr/bin/env bash
# Call 3 (2026-11-27, twenty-first session, 4×H100 `nvidia-h100-x4`): the 4-rank bounds between
# plans at 1–64 MB, where call 1 left AllReduce 4/8 MB at 0.98/1.00, ReduceScatter 2 MB 0.98,
# Reduce 4–16 MB 0.57–0.79 and Broadcast 8–16 MB 0.80–0.89. Each variant moves one bound (or
# the split plans' window, call 2's best at 16 MB) from its default; NCCL beside, twice (first and
# last) for the spread. Float, CUDA graphs, out of place, root 0.
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
run() { local n=$1; shift; timeout 60 "$@" >"$OUT/logs/$n.log" 2>&1; echo "$n rc=$? $(grep -c ' 0 wrong' "$OUT/logs/$n.log") ok lines"; }
{
make -B -C examples/cbench CFLAGS='-O2 -Wall' >/dev/null 2>&1 || make -B -C examples/cbench CFLAGS='-O2 -Wall' OMP= >/dev/null
S=(-g 4 -t allreduce,reducescatter,allgather,broadcast,reduce -d float -b 1M -e 64M -f 2 -w 5 -n 20 -G 10 -c 1 -p 0)
run nccl "${R[@]}" $CB "${S[@]}"
run v00-default "${W[@]}" $CB "${S[@]}"
i=1
for v in WEFT_ALLREDUCE_LL2_MAX_BYTES=4M WEFT_ALLREDUCE_LL2_MAX_BYTES=8M WEFT_RING_MIN_BYTES=2M WEFT_RING_MIN_BYTES=4M \
         WEFT_COLL_LL_MAX_BYTES=512K WEFT_COLL_LL_MAX_BYTES=1M WEFT_REDUCE_LL_MAX_BYTES=4M \
         WEFT_BROADCAST_SPLIT_LL_MAX_BYTES=16M WEFT_REDUCE_SPLIT_LL_MAX_BYTES=16M WEFT_ROOTED_SHAPE=128x512w4M \
         WEFT_ROOTED_SHAPE=128x512w2Md8 WEFT_HB_SHAPE=32x1024w4M; do
  run "$(printf 'v%02d' $i)-$v" "${W[@]}" "$v" $CB "${S[@]}"
  i=$((i+1))
done
run nccl2 "${R[@]}" $CB "${S[@]}"
el ratios
python3 scripts/cbench-ratios.py "$OUT/logs/nccl.log" "$OUT/logs/nccl2.log" $(ls "$OUT"/logs/v*.log)
grep -H "wrong elements" "$OUT"/logs/*.log | grep -v " 0 wrong"
grep -H -i "error\|fail\|timeout" "$OUT"/logs/*.log | head -20
el done
} >"$OUT/bounds.txt" 2>&1
tar -czf "$OUT/logs.tar.gz" -C "$OUT" logs && rm -rf "$OUT/logs"
cat "$OUT/bounds.txt"
