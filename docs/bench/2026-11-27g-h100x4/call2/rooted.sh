#!/usr/bin/env bash
# Call 2 (2026-11-27, twenty-first session, 4×H100 `nvidia-h100-x4`): the split Broadcast and
# Reduce at 4–64 MB on 4 ranks, where they trail NCCL (call 1: Reduce 4/8/16 MB 0.79/0.69/0.57,
# Broadcast 8/16 MB 0.89/0.80). Sweep of the windowed split plans' shape (WEFT_ROOTED_SHAPE:
# blocks x threads, window, depth, pipeline) with the LL split plans bounded to 2 MiB, beside the
# defaults and NCCL. Float, CUDA graphs, out of place, root 0.
set -u
T0=$(date +%s)
tar -xzf .gpuz/bundle.tgz
export NCCL_NVLS_ENABLE=0; unset WEFT_NVLS
export WEFT_REQUIRE=nvlink
B=.gpu; CB=examples/cbench/cbench
W=(env LD_PRELOAD=$PWD/$B/libweft_nccl.so WEFT_NCCL_FALLBACK=0 WEFT_DEBUG=WARN)
R=(env -u LD_PRELOAD NCCL_DEBUG=WARN)
NOLL=(WEFT_REDUCE_SPLIT_LL_MAX_BYTES=2M WEFT_BROADCAST_SPLIT_LL_MAX_BYTES=2M)
mkdir -p "$OUT/logs"
el() { echo "== $(( $(date +%s) - T0 )) s: $*"; }
run() { local n=$1; shift; timeout 60 "$@" >"$OUT/logs/$n.log" 2>&1; echo "$n rc=$? $(grep -c ' 0 wrong' "$OUT/logs/$n.log") ok lines"; }
{
make -B -C examples/cbench CFLAGS='-O2 -Wall' >/dev/null 2>&1 || make -B -C examples/cbench CFLAGS='-O2 -Wall' OMP= >/dev/null
S=(-g 4 -t broadcast,reduce -d float -b 4M -e 64M -f 2 -w 5 -n 20 -G 10 -c 1 -p 0)
run nccl "${R[@]}" $CB "${S[@]}"
run v00-default "${W[@]}" $CB "${S[@]}"
run v01-noll "${W[@]}" "${NOLL[@]}" $CB "${S[@]}"
i=2
for sh in 128x512w8Md4p4 128x512w8Md8p4 128x512w4Md4p4 128x512w2Md8p4 128x512w16Md4p8 128x512w8Md2p8 128x512w8Md4p2 192x512w8Md4p4 64x1024w8Md4p4 256x256w8Md4p4 128x512w4Md8p8; do
  run "$(printf 'v%02d' $i)-$sh" "${W[@]}" "${NOLL[@]}" WEFT_ROOTED_SHAPE=$sh $CB "${S[@]}"
  i=$((i+1))
done
el ratios
python3 scripts/cbench-ratios.py "$OUT/logs/nccl.log" $(ls "$OUT"/logs/v*.log)
grep -H "wrong elements" "$OUT"/logs/*.log | grep -v " 0 wrong"
grep -H -i "error\|fail\|timeout" "$OUT"/logs/*.log | head -20
el done
} >"$OUT/rooted.txt" 2>&1
tar -czf "$OUT/logs.tar.gz" -C "$OUT" logs && rm -rf "$OUT/logs"
cat "$OUT/rooted.txt"
