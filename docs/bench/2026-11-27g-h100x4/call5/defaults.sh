#!/usr/bin/env bash
# Call 5 (2026-11-27, twenty-first session, 4×H100 `nvidia-h100-x4`): the defaults of commit
# 779ee00 (LL128 segments of ReduceScatter/AllToAll to 2 MiB and AllGather to 1 MiB from 3 ranks;
# split Broadcast/Reduce windows 4 MiB × 4 on 4–5 ranks) beside NCCL on 4, 3 and 2 ranks; in place
# bfloat16 root 3 for correctness; and a sweep of the windowed AllReduce's shape at 2–16 MB on 4
# ranks (WEFT_HB_SHAPE; only the allreduce rows of those runs count: it also reshapes the others).
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
C=allreduce,allgather,reducescatter,alltoall,broadcast,reduce
for g in 4 3 2; do
  el "$g ranks"
  S=(-g $g -t $C -d float -b 256K -e 64M -f 2 -w 5 -n 20 -G 10 -c 1 -p 0)
  run n$g-nccl "${R[@]}" $CB "${S[@]}"
  run n$g-weft "${W[@]}" $CB "${S[@]}"
  run n$g-nccl2 "${R[@]}" $CB "${S[@]}"
done
el "4 ranks large rooted"
S=(-g 4 -t broadcast,reduce -d float -b 16M -e 1G -f 4 -w 3 -n 10 -G 10 -c 1 -p 0)
run big-nccl "${R[@]}" $CB "${S[@]}"
run big-weft "${W[@]}" $CB "${S[@]}"
el "in place bfloat16 root 3"
run ip4 "${W[@]}" $CB -g 4 -t $C -d bfloat16 -r 3 -b 256K -e 64M -f 4 -w 2 -n 5 -G 5 -c 1 -p 1
run ip3 "${W[@]}" $CB -g 3 -t $C -d bfloat16 -r 2 -b 256K -e 64M -f 4 -w 2 -n 5 -G 5 -c 1 -p 1
el "AllReduce shapes"
S=(-g 4 -t allreduce -d float -b 2M -e 16M -f 2 -w 5 -n 20 -G 10 -c 1 -p 0)
run ar-nccl "${R[@]}" $CB "${S[@]}"
run ar-default "${W[@]}" $CB "${S[@]}"
for sh in 64x512 64x1024 32x1024w2M 32x1024w1M 128x512w2M 48x1024w2M; do
  run "ar-$sh" "${W[@]}" WEFT_HB_SHAPE=$sh $CB "${S[@]}"
done
el ratios
for g in 4 3 2; do python3 scripts/cbench-ratios.py "$OUT/logs/n$g-nccl.log" "$OUT/logs/n$g-nccl2.log" "$OUT/logs/n$g-weft.log"; done
python3 scripts/cbench-ratios.py "$OUT/logs/big-nccl.log" "$OUT/logs/big-weft.log"
python3 scripts/cbench-ratios.py "$OUT/logs/ar-nccl.log" "$OUT/logs/ar-default.log" $(ls "$OUT"/logs/ar-[0-9]*.log)
grep -H "wrong elements" "$OUT"/logs/*.log | grep -v " 0 wrong"
grep -H -i "error\|fail\|timeout" "$OUT"/logs/*.log | head -20
el done
} >"$OUT/defaults.txt" 2>&1
tar -czf "$OUT/logs.tar.gz" -C "$OUT" logs && rm -rf "$OUT/logs"
cat "$OUT/defaults.txt"
