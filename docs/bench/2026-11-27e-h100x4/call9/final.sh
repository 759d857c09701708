#!/usr/bin/env bash
# Call 9 (2026-11-27, nineteenth session, 4×H100 `nvidia-h100-x4`): the session's final build
# through scripts/gpu-four.sh (every collective, 4 and 3 ranks, windows, root 3 in place); then
# AllToAll 8 - 512 MB with its segments cut into 4 windows (this build) against 14e7558's library
# (.gpuz/old.so.gz, one window per 4 MiB), twice alternated; the chain Broadcast/Reduce on the
# rings' shape (WEFT_ALGO=ring, WEFT_HB_SHAPE=64x512w16M) and the AllReduce ring from 2 MiB
# (WEFT_RING_MIN_BYTES=2M), once each; NCCL in the same call.
set -u
T0=$(date +%s)
tar -xzf .gpuz/bundle.tgz
gunzip -c .gpuz/old.so.gz > .gpu/old_libweft_nccl.so
BUDGET=300 bash .gpu/gpu-four.sh >/dev/null 2>&1; echo "gpu-four rc=$?"
export NCCL_NVLS_ENABLE=0; unset WEFT_NVLS
export WEFT_REQUIRE=nvlink
B=.gpu; CB=examples/cbench/cbench
W=(env LD_PRELOAD=$PWD/$B/libweft_nccl.so WEFT_NCCL_FALLBACK=0 WEFT_DEBUG=WARN)
O=(env LD_PRELOAD=$PWD/$B/old_libweft_nccl.so WEFT_NCCL_FALLBACK=0 WEFT_DEBUG=WARN)
R=(env -u LD_PRELOAD NCCL_DEBUG=WARN)
mkdir -p "$OUT/x"
el() { echo "== $(( $(date +%s) - T0 )) s: $*"; }
run() { local n=$1; shift; timeout 60 "$@" >"$OUT/x/$n.log" 2>&1; echo "$n rc=$?"; }
{
A=(-g 4 -t alltoall -d float -b 8M -e 512M -f 4 -w 3 -n 10 -G 10 -c 1 -p 0)
for rep in 1 2; do
  el "rep $rep"
  run a2a-nccl$rep "${R[@]}" $CB "${A[@]}"
  run a2a-new$rep "${W[@]}" $CB "${A[@]}"
  run a2a-old$rep "${O[@]}" $CB "${A[@]}"
done
el "chains, ring from 2M"
C=(-g 4 -t broadcast,reduce -d float -b 8M -e 512M -f 4 -w 3 -n 10 -G 10 -c 1 -p 0)
run chain-nccl "${R[@]}" $CB "${C[@]}"
run chain-weft "${W[@]}" WEFT_ALGO=ring WEFT_HB_SHAPE=64x512w16M $CB "${C[@]}"
D=(-g 4 -t allreduce -d float -b 1M -e 8M -f 2 -w 5 -n 20 -G 10 -c 1 -p 0)
run ring-nccl "${R[@]}" $CB "${D[@]}"
run ring-def "${W[@]}" $CB "${D[@]}"
run ring-2M "${W[@]}" WEFT_RING_MIN_BYTES=2M $CB "${D[@]}"
el ratios
for rep in 1 2; do python3 scripts/cbench-ratios.py "$OUT/x/a2a-nccl$rep.log" "$OUT/x/a2a-old$rep.log" "$OUT/x/a2a-new$rep.log"; done
python3 scripts/cbench-ratios.py "$OUT/x/chain-nccl.log" "$OUT/x/chain-weft.log"
python3 scripts/cbench-ratios.py "$OUT/x/ring-nccl.log" "$OUT/x/ring-def.log" "$OUT/x/ring-2M.log"
grep -H "wrong elements" "$OUT"/x/*.log | grep -v " 0 wrong"; grep -c " 0 wrong elements" "$OUT"/x/*.log | tr '\n' ' '
el done
} >"$OUT/extra.txt" 2>&1
tar -czf "$OUT/extra-logs.tar.gz" -C "$OUT" x && rm -rf "$OUT/x"
cat "$OUT/summary.txt" "$OUT/extra.txt"
