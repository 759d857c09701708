#!/usr/bin/env bash
# Call 10 (2026-11-27, nineteenth session, 2 GPUs of the 4×H100 host): on 2 ranks, the LL
# AllGather with its put and its unpack in groups of their own and the LL ReduceScatter with its
# put and its combine in groups of their own (this build) against one group (the previous commit's
# library, .gpuz/old.so.gz), float 8 B - 1 MB and bfloat16 through symmetric windows (-R 2),
# twice alternated, NCCL in the same call.
set -u
T0=$(date +%s)
tar -xzf .gpuz/bundle.tgz
gunzip -c .gpuz/old.so.gz > .gpu/old_libweft_nccl.so
export NCCL_NVLS_ENABLE=0; unset WEFT_NVLS
export WEFT_REQUIRE=nvlink
B=.gpu; CB=examples/cbench/cbench
W=(env LD_PRELOAD=$PWD/$B/libweft_nccl.so WEFT_NCCL_FALLBACK=0 WEFT_DEBUG=WARN)
O=(env LD_PRELOAD=$PWD/$B/old_libweft_nccl.so WEFT_NCCL_FALLBACK=0 WEFT_DEBUG=WARN)
R=(env -u LD_PRELOAD NCCL_DEBUG=WARN)
mkdir -p "$OUT/logs"
el() { echo "== $(( $(date +%s) - T0 )) s: $*"; }
run() { local n=$1; shift; timeout 60 "$@" >"$OUT/logs/$n.log" 2>&1; echo "$n rc=$?"; }
{
make -B -C examples/cbench CFLAGS='-O2 -Wall' >/dev/null 2>&1 || make -B -C examples/cbench CFLAGS='-O2 -Wall' OMP= >/dev/null
F=(-g 2 -t allgather,reducescatter -d float -b 8 -e 1M -f 4 -w 5 -n 50 -G 10 -c 1 -p 0)
WN=(-g 2 -t allgather,reducescatter -d bfloat16 -R 2 -b 8 -e 1M -f 8 -w 5 -n 50 -G 10 -c 1 -p 0)
for rep in 1 2; do
  for k in f wn; do
    case $k in f) A=("${F[@]}");; wn) A=("${WN[@]}");; esac
    el "rep $rep $k"
    run $k-nccl$rep "${R[@]}" $CB "${A[@]}"
    run $k-new$rep "${W[@]}" $CB "${A[@]}"
    run $k-old$rep "${O[@]}" $CB "${A[@]}"
  done
done
el ratios
for rep in 1 2; do for k in f wn; do
  python3 scripts/cbench-ratios.py "$OUT/logs/$k-nccl$rep.log" "$OUT/logs/$k-old$rep.log" "$OUT/logs/$k-new$rep.log"
done; done
grep -H "wrong elements" "$OUT"/logs/*.log | grep -v " 0 wrong"; grep -c " 0 wrong elements" "$OUT"/logs/*.log | tr '\n' ' '
el done
} >"$OUT/two.txt" 2>&1
tar -czf "$OUT/logs.tar.gz" -C "$OUT" logs && rm -rf "$OUT/logs"
cat "$OUT/two.txt"
