#!/usr/bin/env bash
# Call 6 (2026-11-27, twentieth session, 4×H100 `nvidia-h100-x4`): slots of one chunk
# (plan.Plan.SlotChunks) in the split LL Broadcast/Reduce and the two-phase LL AllReduce, on the
# GPUs: 4 ranks float 256 KB - 16 MB (every root-0 plan those sizes take), bfloat16 root 3 in place,
# 3 ranks; NCCL beside; and on 3 ranks the 4-rank LL128 bounds (two-phase LL AllReduce and Reduce
# LL to 2 MiB, split LL Reduce and Broadcast to 8 MiB) against 3 ranks' own.
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
FOUR=(WEFT_ALLREDUCE_LL2_MAX_BYTES=2M WEFT_REDUCE_LL_MAX_BYTES=2M WEFT_REDUCE_SPLIT_LL_MAX_BYTES=8M WEFT_BROADCAST_SPLIT_LL_MAX_BYTES=8M)
{
make -B -C examples/cbench CFLAGS='-O2 -Wall' >/dev/null 2>&1 || make -B -C examples/cbench CFLAGS='-O2 -Wall' OMP= >/dev/null
S=(-t allreduce,broadcast,reduce -d float -b 256K -e 16M -f 2 -w 5 -n 20 -G 10 -c 1 -p 0)
el "4 ranks"
run n4-nccl "${R[@]}" $CB -g 4 "${S[@]}"
run n4-weft "${W[@]}" $CB -g 4 "${S[@]}"
run n4-inplace "${W[@]}" $CB -g 4 -t allreduce,broadcast,reduce -d bfloat16 -r 3 -b 256K -e 16M -f 4 -w 2 -n 5 -G 5 -c 1 -p 1
el "3 ranks"
run n3-nccl "${R[@]}" $CB -g 3 "${S[@]}"
run n3-weft "${W[@]}" $CB -g 3 "${S[@]}"
run n3-four "${W[@]}" "${FOUR[@]}" $CB -g 3 "${S[@]}"
run n3-inplace "${W[@]}" "${FOUR[@]}" $CB -g 3 -t allreduce,broadcast,reduce -d bfloat16 -r 1 -b 256K -e 16M -f 4 -w 2 -n 5 -G 5 -c 1 -p 1
el ratios
python3 scripts/cbench-ratios.py "$OUT/logs/n4-nccl.log" "$OUT/logs/n4-weft.log"
python3 scripts/cbench-ratios.py "$OUT/logs/n3-nccl.log" "$OUT/logs/n3-weft.log" "$OUT/logs/n3-four.log"
grep -H "wrong elements" "$OUT"/logs/*.log | grep -v " 0 wrong"
grep -H -i "error\|fail\|timeout" "$OUT"/logs/*.log | head -20
el done
} >"$OUT/slots.txt" 2>&1
tar -czf "$OUT/logs.tar.gz" -C "$OUT" logs && rm -rf "$OUT/logs"
cat "$OUT/slots.txt"
