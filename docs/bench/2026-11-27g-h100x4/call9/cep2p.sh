#!/usr/bin/env bash
# Call 9 (2026-11-27, twenty-first session, 4×H100 `nvidia-h100-x4`): copy-engine point-to-point
# past two ranks (measured only on 2 so far; hal/nvlink's default is off beyond): AllToAll,
# sendrecv, gather and scatter with WEFT_CE_P2P_MIN_BYTES 16M / 32M / 64M (AllToAll segments from
# half of it) against the SM plans and NCCL (twice), on 4 and 3 ranks, float, out of place.
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
run() { local n=$1; shift; timeout 120 "$@" >"$OUT/logs/$n.log" 2>&1; echo "$n rc=$? $(grep -c ' 0 wrong' "$OUT/logs/$n.log") ok lines"; }
{
make -B -C examples/cbench CFLAGS='-O2 -Wall' >/dev/null 2>&1 || make -B -C examples/cbench CFLAGS='-O2 -Wall' OMP= >/dev/null
for g in 4 3; do
  el "$g ranks"
  S=(-g $g -t alltoall,sendrecv,gather,scatter -d float -b 8M -e 1G -f 4 -w 3 -n 10 -G 10 -c 1 -p 0)
  run n$g-nccl "${R[@]}" $CB "${S[@]}"
  run n$g-sm "${W[@]}" $CB "${S[@]}"
  for m in 16M 32M 64M; do run n$g-ce$m "${W[@]}" WEFT_CE_P2P_MIN_BYTES=$m $CB "${S[@]}"; done
  run n$g-nccl2 "${R[@]}" $CB "${S[@]}"
done
el ratios
for g in 4 3; do python3 scripts/cbench-ratios.py "$OUT/logs/n$g-nccl.log" "$OUT/logs/n$g-nccl2.log" "$OUT/logs/n$g-sm.log" "$OUT/logs/n$g-ce16M.log" "$OUT/logs/n$g-ce32M.log" "$OUT/logs/n$g-ce64M.log"; done
grep -H "wrong elements" "$OUT"/logs/*.log | grep -v " 0 wrong"
grep -H -i "error\|fail\|timeout" "$OUT"/logs/*.log | head -20
el done
} >"$OUT/cep2p.txt" 2>&1
tar -czf "$OUT/logs.tar.gz" -C "$OUT" logs && rm -rf "$OUT/logs"
cat "$OUT/cep2p.txt"
