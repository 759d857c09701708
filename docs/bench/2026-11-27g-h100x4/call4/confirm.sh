#!/usr/bin/env bash
# Call 4 (2026-11-27, twenty-first session, 4×H100 `nvidia-h100-x4`): the two candidates of
# calls 2–3 over the sizes they would change. (a) The split plans' shape (WEFT_ROOTED_SHAPE) with
# 2–4 MiB windows and 4–8 in flight, Broadcast and Reduce 16 MB – 1 GB. (b) The collective LL
# bound (WEFT_COLL_LL_MAX_BYTES) 512K / 1M on 4 ranks for AllGather, ReduceScatter and AllToAll,
# 256 KB – 8 MB, and on 3 ranks. NCCL beside, twice. Float, CUDA graphs, out of place, root 0.
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
el "(a) rooted shapes"
S=(-g 4 -t broadcast,reduce -d float -b 16M -e 1G -f 4 -w 3 -n 10 -G 10 -c 1 -p 0)
run a-nccl "${R[@]}" $CB "${S[@]}"
run a-default "${W[@]}" $CB "${S[@]}"
for sh in 128x512w2Md8 128x512w4Md8 128x512w2Md4 128x512w4Md4 128x512w2Md16; do
  run "a-$sh" "${W[@]}" WEFT_ROOTED_SHAPE=$sh $CB "${S[@]}"
done
run a-nccl2 "${R[@]}" $CB "${S[@]}"
el "(b) coll LL bound"
for g in 4 3; do
  S=(-g $g -t allgather,reducescatter,alltoall -d float -b 256K -e 8M -f 2 -w 5 -n 20 -G 10 -c 1 -p 0)
  run b$g-nccl "${R[@]}" $CB "${S[@]}"
  run b$g-default "${W[@]}" $CB "${S[@]}"
  run b$g-512K "${W[@]}" WEFT_COLL_LL_MAX_BYTES=512K $CB "${S[@]}"
  run b$g-1M "${W[@]}" WEFT_COLL_LL_MAX_BYTES=1M $CB "${S[@]}"
  run b$g-2M "${W[@]}" WEFT_COLL_LL_MAX_BYTES=2M $CB "${S[@]}"
  run b$g-nccl2 "${R[@]}" $CB "${S[@]}"
done
el ratios
python3 scripts/cbench-ratios.py "$OUT/logs/a-nccl.log" "$OUT/logs/a-nccl2.log" "$OUT/logs/a-default.log" $(ls "$OUT"/logs/a-128*.log)
for g in 4 3; do python3 scripts/cbench-ratios.py "$OUT/logs/b$g-nccl.log" "$OUT/logs/b$g-nccl2.log" "$OUT/logs/b$g-default.log" "$OUT/logs/b$g-512K.log" "$OUT/logs/b$g-1M.log" "$OUT/logs/b$g-2M.log"; done
grep -H "wrong elements" "$OUT"/logs/*.log | grep -v " 0 wrong"
grep -H -i "error\|fail\|timeout" "$OUT"/logs/*.log | head -20
el done
} >"$OUT/confirm.txt" 2>&1
tar -czf "$OUT/logs.tar.gz" -C "$OUT" logs && rm -rf "$OUT/logs"
cat "$OUT/confirm.txt"
