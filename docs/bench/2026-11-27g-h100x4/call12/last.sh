#!/usr/bin/env bash
# Call 12 (2026-11-27, twenty-first session, 4×H100 `nvidia-h100-x4`): the session's final build
# on two ranks (`-g 2`: every operation 8 B – 64 MB float beside NCCL, bfloat16 in place with
# counts that leave buffers unaligned), and for the next session AllToAll on 4 ranks at
# 32–512 MB under other two-group shapes (WEFT_HB_SHAPE, which also reshapes the others: only the
# alltoall rows count). make gpu-bundle-four; carry .gpuz.
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
C=allreduce,allgather,reducescatter,alltoall,broadcast,reduce,sendrecv,gather,scatter
el "2 ranks"
S=(-g 2 -t $C -d float -b 8 -e 64M -f 8 -w 3 -n 10 -G 10 -c 1 -p 0)
run n2-nccl "${R[@]}" $CB "${S[@]}"
run n2-weft "${W[@]}" $CB "${S[@]}"
run n2-ip "${W[@]}" $CB -g 2 -t $C -d bfloat16 -r 1 -b 6 -e 48M -f 8 -w 1 -n 2 -G 2 -c 1 -p 1
el "4 ranks AllToAll shapes"
S=(-g 4 -t alltoall -d float -b 32M -e 512M -f 4 -w 3 -n 10 -G 10 -c 1 -p 0)
run a-nccl "${R[@]}" $CB "${S[@]}"
run a-default "${W[@]}" $CB "${S[@]}"
for sh in 64x512w2M 64x512w8M 96x512w4M; do run "a-$sh" "${W[@]}" WEFT_HB_SHAPE=$sh $CB "${S[@]}"; done
el ratios
python3 scripts/cbench-ratios.py "$OUT/logs/n2-nccl.log" "$OUT/logs/n2-weft.log"
python3 scripts/cbench-ratios.py "$OUT/logs/a-nccl.log" "$OUT/logs/a-default.log" $(ls "$OUT"/logs/a-[0-9]*.log)
grep -H "wrong elements" "$OUT"/logs/*.log | grep -v " 0 wrong"
grep -H -i "error\|fail\|timeout" "$OUT"/logs/*.log | head -20
el done
} >"$OUT/last.txt" 2>&1
tar -czf "$OUT/logs.tar.gz" -C "$OUT" logs && rm -rf "$OUT/logs"
cat "$OUT/last.txt"
