#!/usr/bin/env bash
# Call 3 (2026-11-27, nineteenth session, 4×H100 `nvidia-h100-x4`): the two-phase LL AllReduce
# (AllReduce2PALL, default up to 4 MiB from 4 ranks) against the windowed plan it replaces
# (WEFT_ALLREDUCE_LL2_MAX_BYTES=0) and a 2 MiB bound, 256 KB - 8 MB; the rings' own shape
# (Config.RingHB, default 64x512 with 16 MiB windows) against the HB shape's 32x1024w8M and
# 64x512w8M; the two-group plans (AllGather, AllToAll) with 4 and 2 MiB windows, 8 - 512 MB.
# float, twice alternated, NCCL in the same call.
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
M=(-g 4 -t allreduce -d float -b 256K -e 8M -f 2 -w 3 -n 20 -G 10 -c 1 -p 0)
L=(-g 4 -t allreduce,reducescatter,allgather,alltoall -d float -b 8M -e 512M -f 4 -w 3 -n 10 -G 10 -c 1 -p 0)
for rep in 1 2; do
  el "rep $rep: AllReduce mid sizes"
  run a-nccl$rep "${R[@]}" $CB "${M[@]}"
  run a-def$rep "${W[@]}" $CB "${M[@]}"
  run a-ll2off-$rep "${W[@]}" WEFT_ALLREDUCE_LL2_MAX_BYTES=0 $CB "${M[@]}"
  run a-ll2to2M-$rep "${W[@]}" WEFT_ALLREDUCE_LL2_MAX_BYTES=2M $CB "${M[@]}"
  el "rep $rep: large sizes"
  run l-nccl$rep "${R[@]}" $CB "${L[@]}"
  run l-def$rep "${W[@]}" $CB "${L[@]}"
  run l-ring32x1024w8M-$rep "${W[@]}" WEFT_RING_SHAPE=32x1024w8M $CB "${L[@]}"
  run l-ring64x512w8M-$rep "${W[@]}" WEFT_RING_SHAPE=64x512w8M $CB "${L[@]}"
  run l-hb64x512w4M-$rep "${W[@]}" WEFT_HB_SHAPE=64x512w4M $CB "${L[@]}"
  run l-hb64x512w2M-$rep "${W[@]}" WEFT_HB_SHAPE=64x512w2M $CB "${L[@]}"
done
el ratios
for rep in 1 2; do
  python3 scripts/cbench-ratios.py "$OUT/logs/a-nccl$rep.log" "$OUT"/logs/a-ll2*-$rep.log "$OUT/logs/a-def$rep.log"
  python3 scripts/cbench-ratios.py "$OUT/logs/l-nccl$rep.log" "$OUT"/logs/l-[rh]*-$rep.log "$OUT/logs/l-def$rep.log"
done
grep -H "wrong elements" "$OUT"/logs/*.log | grep -v " 0 wrong"; grep -c " 0 wrong elements" "$OUT"/logs/*.log | tr '\n' ' '
el done
} >"$OUT/ar.txt" 2>&1
tar -czf "$OUT/logs.tar.gz" -C "$OUT" logs && rm -rf "$OUT/logs"
cat "$OUT/ar.txt"
