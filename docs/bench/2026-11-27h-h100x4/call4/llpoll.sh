#!/usr/bin/env bash
# Call 4 (2026-11-27, twenty-second session, 4×H100 `nvidia-h100-x4`): LL transfers with several
# packet sources (the root of an LL Reduce, the combines of AllReduce and ReduceScatter) load
# every source's packet (LL16/LL8) or line (LL128) once before polling any, instead of polling
# one source after the other — against the build before (f1e4076, .gpuz/old.so), NCCL first and
# last, 8 B – 2 MB on 4 and 3 ranks (two alternations); 2 ranks new only (one packet source there:
# the code path is unchanged).
# Build: make gpu-bundle-four; the f1e4076 library as .gpuz/old.so; carry .gpuz.
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
C=allreduce,allgather,reducescatter,alltoall,broadcast,reduce
for g in 4 3; do
  el "$g ranks float 8 B - 2 MB"
  S=(-g $g -t $C -d float -b 8 -e 2M -f 4 -w 3 -n 20 -G 10 -c 1 -p 0)
  run g$g-nccl "${R[@]}" $CB "${S[@]}"
  run g$g-old "${O[@]}" $CB "${S[@]}"
  run g$g-new "${W[@]}" $CB "${S[@]}"
  run g$g-old2 "${O[@]}" $CB "${S[@]}"
  run g$g-new2 "${W[@]}" $CB "${S[@]}"
  run g$g-nccl2 "${R[@]}" $CB "${S[@]}"
done
el "2 ranks float 8 B - 2 MB"
S=(-g 2 -t $C -d float -b 8 -e 2M -f 4 -w 3 -n 20 -G 10 -c 1 -p 0)
run t2-nccl "${R[@]}" $CB "${S[@]}"
run t2-new "${W[@]}" $CB "${S[@]}"
el "bfloat16 in place, root 1, 4 and 3 ranks, 8 B - 4 MB"
run bf4 "${W[@]}" $CB -g 4 -t $C -d bfloat16 -r 1 -b 8 -e 4M -f 4 -w 2 -n 3 -G 3 -c 1 -p 1
run bf3 "${W[@]}" $CB -g 3 -t $C -d bfloat16 -r 1 -b 8 -e 4M -f 4 -w 2 -n 3 -G 3 -c 1 -p 1
el ratios
for g in 4 3; do
  python3 scripts/cbench-ratios.py "$OUT"/logs/g$g-nccl.log "$OUT"/logs/g$g-nccl2.log "$OUT"/logs/g$g-old.log "$OUT"/logs/g$g-new.log "$OUT"/logs/g$g-old2.log "$OUT"/logs/g$g-new2.log
done
python3 scripts/cbench-ratios.py "$OUT"/logs/t2-nccl.log "$OUT"/logs/t2-new.log
grep -H "wrong elements" "$OUT"/logs/*.log | grep -v " 0 wrong"
grep -H -i "error\|fail\|timeout" "$OUT"/logs/*.log | head -20
el done
} >"$OUT/llpoll.txt" 2>&1
tar -czf "$OUT/logs.tar.gz" -C "$OUT" logs && rm -rf "$OUT/logs"
cat "$OUT/llpoll.txt"
