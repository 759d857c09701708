#!/usr/bin/env bash
# Call 1 (2026-11-27, twentieth session, 4×H100 `nvidia-h100-x4`): LL128 lines in the wide LL
# plans (WEFT_LL128=1, the new default on NVLink) against LL16 packets (WEFT_LL128=0), NCCL in
# the same call: 4 ranks and 2 ranks (GPUs 0-1), float, 64 KB - 8 MB by 2, every element
# checked, two alternations; on 4 ranks also LL128 with the LL bounds raised (two-phase LL
# AllReduce to 4 MiB, Broadcast/Reduce LL to 2 MiB, split LL Broadcast to 8 MiB, split LL
# Reduce to 4 MiB); bfloat16 and root 3 in place for correctness.
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
RAISE=(WEFT_ALLREDUCE_LL2_MAX_BYTES=4M WEFT_ROOTED_LL_MAX_BYTES=2M WEFT_BROADCAST_SPLIT_LL_MAX_BYTES=8M WEFT_REDUCE_SPLIT_LL_MAX_BYTES=4M)
{
make -B -C examples/cbench CFLAGS='-O2 -Wall' >/dev/null 2>&1 || make -B -C examples/cbench CFLAGS='-O2 -Wall' OMP= >/dev/null
A=(-g 4 -t allreduce,allgather,reducescatter,broadcast,reduce,alltoall -d float -b 64K -e 8M -f 2 -w 5 -n 20 -G 10 -c 1 -p 0)
A2=(-g 2 -t allreduce,allgather,reducescatter,broadcast,reduce,alltoall -d float -b 64K -e 8M -f 2 -w 5 -n 20 -G 10 -c 1 -p 0)
for rep in 1 2; do
  el "4 ranks, rep $rep"
  run n4-nccl$rep "${R[@]}" $CB "${A[@]}"
  run n4-ll16-$rep "${W[@]}" WEFT_LL128=0 $CB "${A[@]}"
  run n4-ll128-$rep "${W[@]}" WEFT_LL128=1 $CB "${A[@]}"
  run n4-raised-$rep "${W[@]}" WEFT_LL128=1 "${RAISE[@]}" $CB "${A[@]}"
  el "2 ranks, rep $rep"
  run n2-nccl$rep "${R[@]}" $CB "${A2[@]}"
  run n2-ll16-$rep "${W[@]}" WEFT_LL128=0 $CB "${A2[@]}"
  run n2-ll128-$rep "${W[@]}" WEFT_LL128=1 $CB "${A2[@]}"
done
el "correctness: bfloat16 and root 3 in place, LL128 raised"
run n4-bf16 "${W[@]}" WEFT_LL128=1 "${RAISE[@]}" $CB -g 4 -t allreduce,allgather,reducescatter,broadcast,reduce,alltoall -d bfloat16 -b 8K -e 8M -f 8 -w 2 -n 5 -G 5 -c 1 -p 0
run n4-inplace "${W[@]}" WEFT_LL128=1 "${RAISE[@]}" $CB -g 4 -t allreduce,broadcast,reduce,allgather,reducescatter -d bfloat16 -r 3 -b 8K -e 8M -f 8 -w 2 -n 5 -G 5 -c 1 -p 1
run n3-raised "${W[@]}" WEFT_LL128=1 "${RAISE[@]}" $CB -g 3 -t allreduce,allgather,reducescatter,broadcast,reduce,alltoall -d float -b 8K -e 8M -f 8 -w 2 -n 5 -G 5 -c 1 -p 0
el ratios
for rep in 1 2; do
  python3 scripts/cbench-ratios.py "$OUT/logs/n4-nccl$rep.log" "$OUT/logs/n4-ll16-$rep.log" "$OUT/logs/n4-ll128-$rep.log" "$OUT/logs/n4-raised-$rep.log"
  python3 scripts/cbench-ratios.py "$OUT/logs/n2-nccl$rep.log" "$OUT/logs/n2-ll16-$rep.log" "$OUT/logs/n2-ll128-$rep.log"
done
grep -H "wrong elements" "$OUT"/logs/*.log | grep -v " 0 wrong"
grep -H -i "error\|fail\|timeout" "$OUT"/logs/*.log | head -20
el done
} >"$OUT/ll128.txt" 2>&1
tar -czf "$OUT/logs.tar.gz" -C "$OUT" logs && rm -rf "$OUT/logs"
cat "$OUT/ll128.txt"
