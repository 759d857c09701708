#!/usr/bin/env bash
# Call 8 (2026-11-27, eighteenth session, 4×H100 `nvidia-h100-x4`): AllReduce (the scratch plans of
# the NCCL ABI: 0.78-0.90x NCCL from 512 KB on 4 ranks) and ReduceScatter (0.72 at 32 MB) against
# the ring family (WEFT_ALGO=ring) and windowed shapes (WEFT_HB_SHAPE: blocks, threads, window),
# float, 512 KB - 512 MB by 4, twice alternated for the default, ring and the best shapes.
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
A=(-g 4 -t allreduce,reducescatter -d float -b 512K -e 512M -f 4 -w 3 -n 10 -G 10 -c 1 -p 0)
for rep in 1 2; do
  el "rep $rep"
  run nccl$rep "${R[@]}" $CB "${A[@]}"
  run def$rep "${W[@]}" $CB "${A[@]}"
  run ring$rep "${W[@]}" WEFT_ALGO=ring $CB "${A[@]}"
  run 40x1024-$rep "${W[@]}" WEFT_HB_SHAPE=40x1024 $CB "${A[@]}"
  run 44x768-$rep "${W[@]}" WEFT_HB_SHAPE=44x768 $CB "${A[@]}"
  run 32x1024w16M-$rep "${W[@]}" WEFT_HB_SHAPE=32x1024w16M $CB "${A[@]}"
  run 32x1024w2M-$rep "${W[@]}" WEFT_HB_SHAPE=32x1024w2M $CB "${A[@]}"
done
el ratios
for rep in 1 2; do python3 scripts/cbench-ratios.py "$OUT/logs/nccl$rep.log" "$OUT"/logs/[d34r]*-$rep.log "$OUT/logs/def$rep.log" "$OUT/logs/ring$rep.log"; done
grep -H "wrong elements" "$OUT"/logs/*.log | grep -v " 0 wrong"; grep -c " 0 wrong elements" "$OUT"/logs/*.log | tr '\n' ' '
el done
} >"$OUT/ar4.txt" 2>&1
tar -czf "$OUT/logs.tar.gz" -C "$OUT" logs && rm -rf "$OUT/logs"
cat "$OUT/ar4.txt"
