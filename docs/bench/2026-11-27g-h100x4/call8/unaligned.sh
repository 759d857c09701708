#!/usr/bin/env bash
# Call 8 (2026-11-27, twenty-first session, 4×H100 `nvidia-h100-x4`): transfers between buffers
# that are 8-byte but not 16-byte aligned (or only element-aligned) — xfer_plain's 8-byte word and
# unrolled element paths — against the previous build (e03af3a, .gpuz/old.so: one element per
# thread) and NCCL, on 3 ranks (cbench rounds counts to a multiple of 3: 32 and 128 MB give
# segments of 11,184,808 bytes), every operation, float and bfloat16, every element checked.
# Build: make gpu-bundle-four; cp the e03af3a library to .gpuz/old.so; carry .gpuz.
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
C=allreduce,allgather,reducescatter,alltoall,broadcast,reduce,sendrecv,gather,scatter
S=(-g 3 -t $C -d float -b 2M -e 384M -f 2 -w 3 -n 10 -G 10 -c 1 -p 0)
el "3 ranks float 2 MB - 384 MB"
run f-nccl "${R[@]}" $CB "${S[@]}"
run f-old "${O[@]}" $CB "${S[@]}"
run f-new "${W[@]}" $CB "${S[@]}"
run f-nccl2 "${R[@]}" $CB "${S[@]}"
el "3 ranks bfloat16 8 B - 64 MB, in place root 1"
run b-new "${W[@]}" $CB -g 3 -t $C -d bfloat16 -r 1 -b 8 -e 64M -f 2 -w 2 -n 3 -G 3 -c 1 -p 1
run b-new-oop "${W[@]}" $CB -g 3 -t $C -d bfloat16 -b 8 -e 64M -f 2 -w 2 -n 3 -G 3 -c 1 -p 0
el "4 ranks float 8 MB - 512 MB (aligned: unchanged)"
S=(-g 4 -t $C -d float -b 8M -e 512M -f 4 -w 3 -n 10 -G 10 -c 1 -p 0)
run g4-nccl "${R[@]}" $CB "${S[@]}"
run g4-new "${W[@]}" $CB "${S[@]}"
el ratios
python3 scripts/cbench-ratios.py "$OUT/logs/f-nccl.log" "$OUT/logs/f-nccl2.log" "$OUT/logs/f-old.log" "$OUT/logs/f-new.log"
python3 scripts/cbench-ratios.py "$OUT/logs/g4-nccl.log" "$OUT/logs/g4-new.log"
grep -H "wrong elements" "$OUT"/logs/*.log | grep -v " 0 wrong"
grep -H -i "error\|fail\|timeout" "$OUT"/logs/*.log | head -20
el done
} >"$OUT/unaligned.txt" 2>&1
tar -czf "$OUT/logs.tar.gz" -C "$OUT" logs && rm -rf "$OUT/logs"
cat "$OUT/unaligned.txt"
