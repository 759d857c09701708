#!/usr/bin/env bash
# Call 4 (2026-11-27, eighteenth session, 4×H100 `nvidia-h100-x4`): where the 4-rank losses of
# call 3 come from. Broadcast/Reduce (0.34x NCCL from 32 MB: the root sends or receives every byte
# once per peer) against the chain plans (WEFT_ALGO=ring, copy engines off) with two HB shapes;
# AllReduce/ReduceScatter/AllToAll/AllGather (0.71-0.93x from 2 MB) against the ring family and
# two HB shapes. float, CUDA graphs, out of place, checked, NCCL 2.28.3 beside.
set -u
T0=$(date +%s)
tar -xzf .gpuz/bundle.tgz
export NCCL_NVLS_ENABLE=0; unset WEFT_NVLS
export WEFT_REQUIRE=nvlink
B=.gpu; CB=examples/cbench/cbench
W=(env LD_PRELOAD=$PWD/$B/libweft_nccl.so WEFT_NCCL_FALLBACK=0 WEFT_DEBUG=WARN)
R=(env -u LD_PRELOAD NCCL_DEBUG=WARN)
OFF=(WEFT_CE_P2P_MIN_BYTES=0 WEFT_CE_REDUCE_MIN_BYTES=0)
mkdir -p "$OUT/logs"
el() { echo "== $(( $(date +%s) - T0 )) s: $*"; }
run() { local n=$1; shift; timeout 60 "$@" >"$OUT/logs/$n.log" 2>&1; echo "$n rc=$?"; }
{
make -B -C examples/cbench CFLAGS='-O2 -Wall' >/dev/null 2>&1 || make -B -C examples/cbench CFLAGS='-O2 -Wall' OMP= >/dev/null
A=(-g 4 -t broadcast,reduce -d float -b 512K -e 512M -f 4 -w 3 -n 10 -G 10 -c 1 -p 0)
el rooted
run r-nccl "${R[@]}" $CB "${A[@]}"
run r-weft "${W[@]}" $CB "${A[@]}"
run r-chain "${W[@]}" "${OFF[@]}" WEFT_ALGO=ring $CB "${A[@]}"
run r-chain-64x512 "${W[@]}" "${OFF[@]}" WEFT_ALGO=ring WEFT_HB_SHAPE=64x512 $CB "${A[@]}"
run r-chain-32x1024w16M "${W[@]}" "${OFF[@]}" WEFT_ALGO=ring WEFT_HB_SHAPE=32x1024w16M $CB "${A[@]}"
run r-hb-off "${W[@]}" "${OFF[@]}" $CB "${A[@]}"
A=(-g 4 -t allreduce,reducescatter,alltoall,allgather -d float -b 512K -e 512M -f 4 -w 3 -n 10 -G 10 -c 1 -p 0)
el coll
run c-nccl "${R[@]}" $CB "${A[@]}"
run c-weft "${W[@]}" $CB "${A[@]}"
run c-ring "${W[@]}" WEFT_ALGO=ring $CB "${A[@]}"
run c-64x512 "${W[@]}" WEFT_HB_SHAPE=64x512 $CB "${A[@]}"
run c-32x1024w16M "${W[@]}" WEFT_HB_SHAPE=32x1024w16M $CB "${A[@]}"
run c-16x1024 "${W[@]}" WEFT_HB_SHAPE=16x1024 $CB "${A[@]}"
el ratios
python3 scripts/cbench-ratios.py "$OUT/logs/r-nccl.log" "$OUT"/logs/r-[cwh]*.log
python3 scripts/cbench-ratios.py "$OUT/logs/c-nccl.log" "$OUT"/logs/c-[0-9rw]*.log
grep -H "wrong elements" "$OUT"/logs/*.log | grep -v " 0 wrong"
grep -h "plan\b\|plan=" "$OUT/logs/c-weft.log" | head -5
el done
} >"$OUT/four2.txt" 2>&1
tar -czf "$OUT/logs.tar.gz" -C "$OUT" logs && rm -rf "$OUT/logs"
cat "$OUT/four2.txt"
