#!/usr/bin/env bash
# Call 8 (2026-11-27, nineteenth session, 4×H100 `nvidia-h100-x4`): the split LL Broadcast and
# Reduce (BroadcastSplitLL, ReduceSplitLL: n−1 chunks in two hops as LL packets), off by default,
# with WEFT_ROOTED_SPLIT_LL_MAX_BYTES at 4 and 8 MiB, and from 128 KiB (WEFT_ROOTED_LL_MAX_BYTES),
# against the default (wide LL to 512 KiB, then the windowed plans), 256 KB - 8 MB, float, 4 ranks
# twice alternated and 3 ranks once, NCCL in the same call.
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
A=(-g 4 -t broadcast,reduce -d float -b 256K -e 8M -f 2 -w 5 -n 20 -G 10 -c 1 -p 0)
for rep in 1 2; do
  el "rep $rep"
  run nccl$rep "${R[@]}" $CB "${A[@]}"
  run def$rep "${W[@]}" $CB "${A[@]}"
  run sll4M-$rep "${W[@]}" WEFT_ROOTED_SPLIT_LL_MAX_BYTES=4M $CB "${A[@]}"
  run sll8M-$rep "${W[@]}" WEFT_ROOTED_SPLIT_LL_MAX_BYTES=8M $CB "${A[@]}"
  run sll4M-from128K-$rep "${W[@]}" WEFT_ROOTED_SPLIT_LL_MAX_BYTES=4M WEFT_ROOTED_LL_MAX_BYTES=128K $CB "${A[@]}"
done
el "3 ranks"
A3=(-g 3 -t broadcast,reduce -d float -b 256K -e 8M -f 2 -w 5 -n 20 -G 10 -c 1 -p 0)
run n3-nccl "${R[@]}" $CB "${A3[@]}"
run n3-def "${W[@]}" $CB "${A3[@]}"
run n3-sll4M "${W[@]}" WEFT_ROOTED_SPLIT_LL_MAX_BYTES=4M $CB "${A3[@]}"
el ratios
for rep in 1 2; do python3 scripts/cbench-ratios.py "$OUT/logs/nccl$rep.log" "$OUT"/logs/sll*-$rep.log "$OUT/logs/def$rep.log"; done
python3 scripts/cbench-ratios.py "$OUT/logs/n3-nccl.log" "$OUT/logs/n3-sll4M.log" "$OUT/logs/n3-def.log"
grep -H "wrong elements" "$OUT"/logs/*.log | grep -v " 0 wrong"; grep -c " 0 wrong elements" "$OUT"/logs/*.log | tr '\n' ' '
el done
} >"$OUT/splitll.txt" 2>&1
tar -czf "$OUT/logs.tar.gz" -C "$OUT" logs && rm -rf "$OUT/logs"
cat "$OUT/splitll.txt"
