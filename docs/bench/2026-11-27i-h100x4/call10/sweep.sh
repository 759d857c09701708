#!/usr/bin/env bash
# Call 10 (2026-11-27, twenty-third session, 4×H100 `nvidia-h100-x4`): the sizes between powers of
# four. Call 9 found AllReduce at 5–7 MB 0.87–0.90× NCCL on the previous build, which the factor-4
# sweeps (8 / 32 MB) never showed. Every operation on 4 ranks, float, 1 – 96 MB by factor 2 from
# 1 and from 1.5 MB (1, 1.5, 2, 3, 4, 6, … MB), NCCL and this build alternated twice, 0 wrong.
# Build: make gpu-bundle-four; carry .gpuz.
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
make -B -C examples/cbench CFLAGS='-O2 -Wall' >/dev/null 2>&1 || make -B -C examples/cbench CFLAGS='-O2 -Wall' OMP= >/dev/null
C=allreduce,allgather,reducescatter,alltoall,broadcast,reduce,sendrecv,gather,scatter
for v in nccl new nccl2 new2; do
  case $v in nccl*) L=("${R[@]}");; *) L=("${W[@]}");; esac
  el "$v"
  timeout 150 "${L[@]}" $CB -g 4 -t $C -d float -b 1M -e 64M -f 2 -w 3 -n 20 -G 5 -c 1 -p 0 >"$OUT/logs/$v-a.log" 2>&1
  timeout 150 "${L[@]}" $CB -g 4 -t $C -d float -b 1536K -e 96M -f 2 -w 3 -n 20 -G 5 -c 1 -p 0 >"$OUT/logs/$v-b.log" 2>&1
  cat "$OUT/logs/$v-a.log" "$OUT/logs/$v-b.log" >"$OUT/logs/$v.log"
done
el ratios
python3 scripts/cbench-ratios.py "$OUT"/logs/nccl.log "$OUT"/logs/nccl2.log "$OUT"/logs/new.log "$OUT"/logs/new2.log
grep -H "wrong elements" "$OUT"/logs/*-[ab].log | grep -v " 0 wrong"
grep -H -i "error\|fail\|timeout" "$OUT"/logs/*.log | head -20
el done
} >"$OUT/sweep.txt" 2>&1
tar -czf "$OUT/logs.tar.gz" -C "$OUT" logs && rm -rf "$OUT/logs"
cat "$OUT/sweep.txt"
