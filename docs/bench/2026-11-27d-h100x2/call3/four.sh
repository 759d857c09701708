#!/usr/bin/env bash
# Call 3 (2026-11-27, eighteenth session, 4×H100 `nvidia-h100-x4`): every collective through the C
# ABI on 4 ranks beside NCCL 2.28.3 (the last 4-GPU run was on 4×H200 on 2026-11-21, before the
# copy-engine and two-rank paths): CUDA graphs, out of place, float and bfloat16, 8 B - 512 MB by
# factors of 4, 1 GB, and symmetric windows (-R 2) for the reducing three; every element checked.
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
{
nvidia-smi -L; nvidia-smi topo -m
make -B -C examples/cbench CFLAGS='-O2 -Wall' >/dev/null 2>&1 || make -B -C examples/cbench CFLAGS='-O2 -Wall' OMP= >/dev/null
for d in float bfloat16; do
  A=(-g 4 -d $d -b 8 -e 512M -f 4 -w 3 -n 10 -G 10 -c 1 -p 0)
  el "$d sweep"
  timeout 120 "${R[@]}" $CB "${A[@]}" >"$OUT/logs/nccl-$d.log" 2>&1; echo rc=$?
  timeout 150 "${W[@]}" $CB "${A[@]}" >"$OUT/logs/weft-$d.log" 2>&1; echo rc=$?
done
A=(-g 4 -d float -b 1G -e 1G -w 3 -n 10 -G 10 -c 1 -p 0)
el "1G"
timeout 90 "${R[@]}" $CB "${A[@]}" >"$OUT/logs/nccl-1g.log" 2>&1; echo rc=$?
timeout 90 "${W[@]}" $CB "${A[@]}" >"$OUT/logs/weft-1g.log" 2>&1; echo rc=$?
A=(-g 4 -t allreduce,allgather,reducescatter -d bfloat16 -R 2 -b 8 -e 512M -f 8 -w 3 -n 10 -G 10 -c 1 -p 0)
el "windows"
timeout 60 "${R[@]}" $CB "${A[@]}" >"$OUT/logs/nccl-win.log" 2>&1; echo rc=$?
timeout 60 "${W[@]}" $CB "${A[@]}" >"$OUT/logs/weft-win.log" 2>&1; echo rc=$?
for s in float bfloat16 1g win; do
  echo "== $s"; python3 scripts/cbench-ratios.py "$OUT/logs/nccl-$s.log" "$OUT/logs/weft-$s.log"
done
grep -H "wrong elements" "$OUT"/logs/*.log
grep -h "exported_calls\|weft: destroy" "$OUT"/logs/weft-float.log | head -3
el done
} >"$OUT/four.txt" 2>&1
tar -czf "$OUT/logs.tar.gz" -C "$OUT" logs && rm -rf "$OUT/logs"
cat "$OUT/four.txt"
