#!/usr/bin/env bash
# Call 10 (2026-11-27, twenty-second session, 4×H100 `nvidia-h100-x4`): the session's final build —
# call 5's (rotated puts, wide LL plans of 128 × 512, the two-phase LL AllReduce to 4/8 MiB, LL
# polls of every source at once) and the split Broadcast root's group per owner — on every collective and point-to-point
# operation, 8 B – 1 GB on 4 ranks, 8 B – 384 MB on 3, 8 B – 64 MB on 2, NCCL beside; bfloat16 in
# place; conformance on 4 ranks (device, memory-mapped).
# make gpu-bundle-four; carry .gpuz.
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
run() { local n=$1; shift; timeout 150 "$@" >"$OUT/logs/$n.log" 2>&1; echo "$n rc=$? $(grep -c ' 0 wrong' "$OUT/logs/$n.log") ok lines"; }
{
make -B -C examples/cbench CFLAGS='-O2 -Wall' >/dev/null 2>&1 || make -B -C examples/cbench CFLAGS='-O2 -Wall' OMP= >/dev/null
C=allreduce,allgather,reducescatter,alltoall,broadcast,reduce,sendrecv,gather,scatter
for g in 4 3 2; do
  case $g in 4) E=1G;; 3) E=384M;; 2) E=64M;; esac
  el "$g ranks"
  S=(-g $g -t $C -d float -b 8 -e $E -f 4 -w 3 -n 10 -G 10 -c 1 -p 0)
  run n$g-nccl "${R[@]}" $CB "${S[@]}"
  run n$g-weft "${W[@]}" $CB "${S[@]}"
done
el "in place bfloat16 4 ranks root 2"
run ip4 "${W[@]}" $CB -g 4 -t $C -d bfloat16 -r 2 -b 8 -e 64M -f 8 -w 2 -n 5 -G 5 -c 1 -p 1
el conformance
timeout 170 $B/weft conformance --hal nvlink --ranks 4 --run device,memory-mapped --md "$OUT/nvlink-h100x4.md" --json "$OUT/nvlink-h100x4.json" > "$OUT/logs/conformance.log" 2>&1
echo "conformance rc=$? $(grep -c -i pass "$OUT/nvlink-h100x4.md" 2>/dev/null) pass lines"
el ratios
for g in 4 3 2; do python3 scripts/cbench-ratios.py "$OUT/logs/n$g-nccl.log" "$OUT/logs/n$g-weft.log"; done
grep -H "wrong elements" "$OUT"/logs/*.log | grep -v " 0 wrong"
grep -H -i "error\|fail\|timeout\|resident" "$OUT"/logs/n*.log "$OUT"/logs/ip4.log | head -20
el done
} >"$OUT/final.txt" 2>&1
tar -czf "$OUT/logs.tar.gz" -C "$OUT" logs && rm -rf "$OUT/logs"
cat "$OUT/final.txt"
