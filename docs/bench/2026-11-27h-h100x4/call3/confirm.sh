#!/usr/bin/env bash
# Call 3 (2026-11-27, twenty-second session, 4×H100 `nvidia-h100-x4`): the new defaults — wide LL
# plans of 128 × 512 on 3 and 4 ranks (the rooted wide LL keeping 32 × 1024), the two-phase LL
# AllReduce to 4 MiB (4 ranks) / 8 MiB (3 ranks), rotated puts but in AllReduceHB — against the
# previous build (HEAD 423df11, .gpuz/old.so) and NCCL (first and last), 64 KB – 16 MB on 4 and
# 3 ranks; the old build with the new shape by environment for the two-phase LL AllReduce
# (ascending puts); 2 ranks 8 B – 16 MB (unchanged there); 4 ranks 8 B – 64 KB; bfloat16 in place.
# Build: make gpu-bundle-four; cp the 423df11 library to .gpuz/old.so; carry .gpuz.
set -u
T0=$(date +%s)
tar -xzf .gpuz/bundle.tgz
export NCCL_NVLS_ENABLE=0; unset WEFT_NVLS
export WEFT_REQUIRE=nvlink
B=.gpu; CB=examples/cbench/cbench
W=(env LD_PRELOAD=$PWD/$B/libweft_nccl.so WEFT_NCCL_FALLBACK=0 WEFT_DEBUG=WARN)
O=(env LD_PRELOAD=$PWD/.gpuz/old.so WEFT_NCCL_FALLBACK=0 WEFT_DEBUG=WARN)
R=(env -u LD_PRELOAD NCCL_DEBUG=WARN)
mkdir -p "$OUT/logs"
el() { echo "== $(( $(date +%s) - T0 )) s: $*"; }
run() { local n=$1; shift; timeout 150 "$@" >"$OUT/logs/$n.log" 2>&1; echo "$n rc=$? $(grep -c ' 0 wrong' "$OUT/logs/$n.log") ok lines"; }
{
make -B -C examples/cbench CFLAGS='-O2 -Wall' >/dev/null 2>&1 || make -B -C examples/cbench CFLAGS='-O2 -Wall' OMP= >/dev/null
C=allreduce,allgather,reducescatter,alltoall,broadcast,reduce
for g in 4 3; do
  el "$g ranks float 64 KB - 16 MB"
  S=(-g $g -t $C -d float -b 64K -e 16M -f 2 -w 3 -n 20 -G 10 -c 1 -p 0)
  run g$g-nccl "${R[@]}" $CB "${S[@]}"
  run g$g-old "${O[@]}" $CB "${S[@]}"
  run g$g-new "${W[@]}" $CB "${S[@]}"
  run g$g-old2 "${O[@]}" $CB "${S[@]}"
  run g$g-new2 "${W[@]}" $CB "${S[@]}"
  run g$g-nccl2 "${R[@]}" $CB "${S[@]}"
done
el "4 ranks AllReduce 512 KB - 4 MB: the old build with the new shape (ascending puts)"
S=(-g 4 -t allreduce -d float -b 512K -e 4M -f 2 -w 3 -n 20 -G 10 -c 1 -p 0)
run ar-oldenv "${O[@]}" WEFT_WIDE_LL_SHAPE=128x512 WEFT_ALLREDUCE_LL2_MAX_BYTES=4M $CB "${S[@]}"
run ar-new "${W[@]}" $CB "${S[@]}"
run ar-oldenv2 "${O[@]}" WEFT_WIDE_LL_SHAPE=128x512 WEFT_ALLREDUCE_LL2_MAX_BYTES=4M $CB "${S[@]}"
run ar-new2 "${W[@]}" $CB "${S[@]}"
el "4 ranks 8 B - 64 KB, every operation"
C2=allreduce,allgather,reducescatter,alltoall,broadcast,reduce,sendrecv,gather,scatter
S=(-g 4 -t $C2 -d float -b 8 -e 64K -f 4 -w 3 -n 20 -G 10 -c 1 -p 0)
run s4-nccl "${R[@]}" $CB "${S[@]}"
run s4-new "${W[@]}" $CB "${S[@]}"
el "2 ranks 8 B - 16 MB"
S=(-g 2 -t $C2 -d float -b 8 -e 16M -f 4 -w 3 -n 20 -G 10 -c 1 -p 0)
run t2-nccl "${R[@]}" $CB "${S[@]}"
run t2-new "${W[@]}" $CB "${S[@]}"
el "bfloat16 in place, root 3 (4 ranks) / 2 (3 ranks), 8 B - 16 MB"
run bf4 "${W[@]}" $CB -g 4 -t $C2 -d bfloat16 -r 3 -b 8 -e 16M -f 4 -w 2 -n 3 -G 3 -c 1 -p 1
run bf3 "${W[@]}" $CB -g 3 -t $C2 -d bfloat16 -r 2 -b 8 -e 16M -f 4 -w 2 -n 3 -G 3 -c 1 -p 1
el ratios
for g in 4 3; do
  python3 scripts/cbench-ratios.py "$OUT"/logs/g$g-nccl.log "$OUT"/logs/g$g-nccl2.log "$OUT"/logs/g$g-old.log "$OUT"/logs/g$g-new.log "$OUT"/logs/g$g-old2.log "$OUT"/logs/g$g-new2.log
done
python3 scripts/cbench-ratios.py "$OUT"/logs/g4-nccl.log "$OUT"/logs/ar-oldenv.log "$OUT"/logs/ar-new.log "$OUT"/logs/ar-oldenv2.log "$OUT"/logs/ar-new2.log
python3 scripts/cbench-ratios.py "$OUT"/logs/s4-nccl.log "$OUT"/logs/s4-new.log
python3 scripts/cbench-ratios.py "$OUT"/logs/t2-nccl.log "$OUT"/logs/t2-new.log
grep -H "wrong elements" "$OUT"/logs/*.log | grep -v " 0 wrong"
grep -H -i "error\|fail\|timeout" "$OUT"/logs/*.log | head -20
el done
} >"$OUT/confirm.txt" 2>&1
tar -czf "$OUT/logs.tar.gz" -C "$OUT" logs && rm -rf "$OUT/logs"
cat "$OUT/confirm.txt"
