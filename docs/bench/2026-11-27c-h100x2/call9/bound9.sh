#!/usr/bin/env bash
# Call 9 (2026-11-27, seventeenth session, 2×H100): with copies to itself on SMs and Broadcasts on
# copy engines from the bound (call 8), the copy-engine point-to-point bound: 64 MiB (default)
# against 16 and 32 MiB (WEFT_CE_P2P_MIN_BYTES), gather/scatter/sendrecv/alltoall/broadcast at
# 16 - 128 MB float, alternated twice, NCCL beside.
set -u
T0=$(date +%s)
tar -xzf .gpuz/bundle.tgz
export NCCL_NVLS_ENABLE=0; unset WEFT_NVLS
B=.gpu; CB=examples/cbench/cbench
W=(env LD_PRELOAD=$PWD/$B/libweft_nccl.so WEFT_NCCL_FALLBACK=0 WEFT_DEBUG=WARN)
R=(env -u LD_PRELOAD NCCL_DEBUG=WARN)
mkdir -p "$OUT/logs"
el() { echo "== $(( $(date +%s) - T0 )) s: $*"; }
{
make -B -C examples/cbench CFLAGS='-O2 -Wall' >/dev/null 2>&1 || make -B -C examples/cbench CFLAGS='-O2 -Wall' OMP= >/dev/null
A=(-g 2 -t gather,scatter,sendrecv,alltoall,broadcast -d float -b 16M -e 128M -f 2 -w 5 -n 20 -G 10 -c 1 -p 0)
for rep in 1 2; do
  el "rep $rep"
  timeout 60 "${R[@]}" $CB "${A[@]}" >"$OUT/logs/nccl$rep.log" 2>&1; echo rc=$?
  for b in 64M 32M 16M; do
    timeout 60 "${W[@]}" WEFT_CE_P2P_MIN_BYTES=$b $CB "${A[@]}" >"$OUT/logs/b$b-$rep.log" 2>&1; echo rc=$?
  done
done
python3 scripts/cbench-ratios.py "$OUT/logs/nccl1.log" "$OUT"/logs/b*-1.log
python3 scripts/cbench-ratios.py "$OUT/logs/nccl2.log" "$OUT"/logs/b*-2.log
grep -h "wrong elements" "$OUT"/logs/*.log | sort | uniq -c
el done
} >"$OUT/bound9.txt" 2>&1
tar -czf "$OUT/logs.tar.gz" -C "$OUT" logs && rm -rf "$OUT/logs"
cat "$OUT/bound9.txt"
