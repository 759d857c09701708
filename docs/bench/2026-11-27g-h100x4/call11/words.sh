#!/usr/bin/env bash
# Call 11 (2026-11-27, twenty-first session, 4×H100 `nvidia-h100-x4`): xfer_plain rewritten around
# one word loop (xfer_words over 16-byte, 8-byte and element words) — the same paths as call 8's
# build. 3 ranks every operation float 2 MB – 256 MB beside NCCL (compare call 8), and for
# correctness int8, bfloat16, double on 3 ranks (segments 1-, 2-, 8-byte aligned), 4 ranks float.
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
run() { local n=$1; shift; timeout 100 "$@" >"$OUT/logs/$n.log" 2>&1; echo "$n rc=$? $(grep -c ' 0 wrong' "$OUT/logs/$n.log") ok lines"; }
{
make -B -C examples/cbench CFLAGS='-O2 -Wall' >/dev/null 2>&1 || make -B -C examples/cbench CFLAGS='-O2 -Wall' OMP= >/dev/null
C=allreduce,allgather,reducescatter,alltoall,broadcast,reduce,sendrecv,gather,scatter
S=(-g 3 -t $C -d float -b 2M -e 256M -f 2 -w 3 -n 10 -G 10 -c 1 -p 0)
el "3 ranks float"
run f-nccl "${R[@]}" $CB "${S[@]}"
run f-new "${W[@]}" $CB "${S[@]}"
el "types"
for d in int8 bfloat16 double; do
  run t3-$d "${W[@]}" $CB -g 3 -t $C -d $d -r 2 -b 8 -e 32M -f 8 -w 1 -n 2 -G 2 -c 1 -p 0
done
run t3-ip-int8 "${W[@]}" $CB -g 3 -t $C -d int8 -r 1 -b 8 -e 32M -f 8 -w 1 -n 2 -G 2 -c 1 -p 1
run t4-float "${W[@]}" $CB -g 4 -t $C -d float -b 8 -e 256M -f 8 -w 1 -n 3 -G 3 -c 1 -p 0
el ratios
python3 scripts/cbench-ratios.py "$OUT/logs/f-nccl.log" "$OUT/logs/f-new.log"
grep -H "wrong elements" "$OUT"/logs/*.log | grep -v " 0 wrong"
grep -H -i "error\|fail\|timeout" "$OUT"/logs/*.log | head -20
el done
} >"$OUT/words.txt" 2>&1
tar -czf "$OUT/logs.tar.gz" -C "$OUT" logs && rm -rf "$OUT/logs"
cat "$OUT/words.txt"
