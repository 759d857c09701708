#!/usr/bin/env bash
# Call 2 (2026-11-27, twentieth session, 4×H100 `nvidia-h100-x4`): the LL128 defaults (WEFT_LL128
# on, WithLL128's bounds from 4 ranks) against LL16 with the old bounds (WEFT_LL128=0) and
# against NCCL, and the bounds still open: on 4 ranks the Reduce's LL bound at 512 KiB with the
# split LL Reduce above it, the split LL Reduce to 8 MiB and Broadcast to 16 MiB, AllGather /
# ReduceScatter / AllToAll LL segments to 512 KiB and 1 MiB; on 2 ranks (GPUs 0-1) the wide 1PA
# AllReduce, the rooted LL and the collectives' LL bounds doubled and quadrupled; 3 ranks default
# against LL16. Float, 64 KB - 16 MB by 2, every element checked, two alternations.
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
S=(-d float -b 64K -e 16M -f 2 -w 5 -n 20 -G 10 -c 1 -p 0)
ALL=allreduce,allgather,reducescatter,broadcast,reduce,alltoall
for rep in 1 2; do
  el "4 ranks, rep $rep"
  run n4-nccl$rep "${R[@]}" $CB -g 4 -t $ALL "${S[@]}"
  run n4-def$rep "${W[@]}" $CB -g 4 -t $ALL "${S[@]}"
  run n4-ll16-$rep "${W[@]}" WEFT_LL128=0 $CB -g 4 -t $ALL "${S[@]}"
  run n4-redsplit512K-$rep "${W[@]}" WEFT_REDUCE_LL_MAX_BYTES=512K $CB -g 4 -t reduce "${S[@]}"
  run n4-split16M-$rep "${W[@]}" WEFT_REDUCE_SPLIT_LL_MAX_BYTES=8M WEFT_BROADCAST_SPLIT_LL_MAX_BYTES=16M $CB -g 4 -t broadcast,reduce "${S[@]}"
  run n4-coll512K-$rep "${W[@]}" WEFT_COLL_LL_MAX_BYTES=512K $CB -g 4 -t allgather,reducescatter,alltoall "${S[@]}"
  run n4-coll1M-$rep "${W[@]}" WEFT_COLL_LL_MAX_BYTES=1M $CB -g 4 -t allgather,reducescatter,alltoall "${S[@]}"
  el "2 ranks, rep $rep"
  run n2-nccl$rep "${R[@]}" $CB -g 2 -t $ALL "${S[@]}"
  run n2-def$rep "${W[@]}" $CB -g 2 -t $ALL "${S[@]}"
  run n2-ll16-$rep "${W[@]}" WEFT_LL128=0 $CB -g 2 -t $ALL "${S[@]}"
  run n2-x2-$rep "${W[@]}" WEFT_ALLREDUCE_LL_MAX_BYTES=4M WEFT_ROOTED_LL_MAX_BYTES=2M WEFT_COLL_LL_MAX_BYTES=1M $CB -g 2 -t $ALL "${S[@]}"
  run n2-x4-$rep "${W[@]}" WEFT_ALLREDUCE_LL_MAX_BYTES=8M WEFT_ROOTED_LL_MAX_BYTES=4M WEFT_COLL_LL_MAX_BYTES=2M $CB -g 2 -t $ALL "${S[@]}"
done
el "3 ranks"
run n3-nccl "${R[@]}" $CB -g 3 -t $ALL "${S[@]}"
run n3-def "${W[@]}" $CB -g 3 -t $ALL "${S[@]}"
run n3-ll16 "${W[@]}" WEFT_LL128=0 $CB -g 3 -t $ALL "${S[@]}"
el ratios
for rep in 1 2; do
  python3 scripts/cbench-ratios.py "$OUT/logs/n4-nccl$rep.log" "$OUT/logs/n4-ll16-$rep.log" "$OUT/logs/n4-def$rep.log" "$OUT/logs/n4-redsplit512K-$rep.log" "$OUT/logs/n4-split16M-$rep.log" "$OUT/logs/n4-coll512K-$rep.log" "$OUT/logs/n4-coll1M-$rep.log"
  python3 scripts/cbench-ratios.py "$OUT/logs/n2-nccl$rep.log" "$OUT/logs/n2-ll16-$rep.log" "$OUT/logs/n2-def$rep.log" "$OUT/logs/n2-x2-$rep.log" "$OUT/logs/n2-x4-$rep.log"
done
python3 scripts/cbench-ratios.py "$OUT/logs/n3-nccl.log" "$OUT/logs/n3-ll16.log" "$OUT/logs/n3-def.log"
grep -H "wrong elements" "$OUT"/logs/*.log | grep -v " 0 wrong"
grep -H -i "error\|fail\|timeout" "$OUT"/logs/*.log | head -20
el done
} >"$OUT/bounds.txt" 2>&1
tar -czf "$OUT/logs.tar.gz" -C "$OUT" logs && rm -rf "$OUT/logs"
cat "$OUT/bounds.txt"
