#!/usr/bin/env bash
# Call 6 (2026-11-27, twenty-first session, 4×H100 `nvidia-h100-x4`, `-g 3`): three ranks, where
# call 5 left Reduce 3–63 MB at 0.54–0.78, Broadcast 7–63 MB 0.87–0.94, ReduceScatter 15–63 MB
# 0.78–0.90 and AllReduce 15–63 MB 0.91–0.93. Sweep: the split plans' windows (WEFT_ROOTED_SHAPE;
# default on 3 ranks 16 MiB × 2) and the windowed rings from 4 or 8 MiB (WEFT_RING_MIN_BYTES; off
# on 3 ranks by default). NCCL beside, twice. Float, CUDA graphs, out of place, root 0.
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
run() { local n=$1; shift; timeout 90 "$@" >"$OUT/logs/$n.log" 2>&1; echo "$n rc=$? $(grep -c ' 0 wrong' "$OUT/logs/$n.log") ok lines"; }
{
make -B -C examples/cbench CFLAGS='-O2 -Wall' >/dev/null 2>&1 || make -B -C examples/cbench CFLAGS='-O2 -Wall' OMP= >/dev/null
el rooted
S=(-g 3 -t broadcast,reduce -d float -b 6M -e 384M -f 4 -w 3 -n 10 -G 10 -c 1 -p 0)
run r-nccl "${R[@]}" $CB "${S[@]}"
run r-default "${W[@]}" $CB "${S[@]}"
for sh in 128x512w8Md4 128x512w4Md4 128x512w4Md8 128x512w8Md8; do
  run "r-$sh" "${W[@]}" WEFT_ROOTED_SHAPE=$sh $CB "${S[@]}"
done
run r-nccl2 "${R[@]}" $CB "${S[@]}"
el rings
S=(-g 3 -t allreduce,reducescatter -d float -b 6M -e 384M -f 4 -w 3 -n 10 -G 10 -c 1 -p 0)
run g-nccl "${R[@]}" $CB "${S[@]}"
run g-default "${W[@]}" $CB "${S[@]}"
run g-ring8M "${W[@]}" WEFT_RING_MIN_BYTES=8M $CB "${S[@]}"
run g-ring4M "${W[@]}" WEFT_RING_MIN_BYTES=4M $CB "${S[@]}"
run g-ring8M-64x512w8M "${W[@]}" WEFT_RING_MIN_BYTES=8M WEFT_RING_SHAPE=64x512w8M $CB "${S[@]}"
run g-nccl2 "${R[@]}" $CB "${S[@]}"
el ratios
python3 scripts/cbench-ratios.py "$OUT/logs/r-nccl.log" "$OUT/logs/r-nccl2.log" "$OUT/logs/r-default.log" $(ls "$OUT"/logs/r-128*.log)
python3 scripts/cbench-ratios.py "$OUT/logs/g-nccl.log" "$OUT/logs/g-nccl2.log" "$OUT/logs/g-default.log" $(ls "$OUT"/logs/g-ring*.log)
grep -H "wrong elements" "$OUT"/logs/*.log | grep -v " 0 wrong"
grep -H -i "error\|fail\|timeout" "$OUT"/logs/*.log | head -20
el done
} >"$OUT/three.txt" 2>&1
tar -czf "$OUT/logs.tar.gz" -C "$OUT" logs && rm -rf "$OUT/logs"
cat "$OUT/three.txt"
