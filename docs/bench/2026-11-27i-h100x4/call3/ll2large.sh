#!/usr/bin/env bash
# Call 3 (2026-11-27, twenty-third session, 4×H100 `nvidia-h100-x4`): the second two-phase LL
# AllReduce plan on 4 ranks (Config.LL2Large, 96 × 1024 above 4 MiB to 8 MiB) against the previous
# build (HEAD afdc2a3, .gpuz/old.so) and NCCL (first and last), float 1 – 32 MB, alternated twice;
# bfloat16 in place 2 – 16 MB (0 wrong); 3 ranks: the same plan by environment to 16 MiB
# (WEFT_ALLREDUCE_LL2_LARGE_SHAPE=96x1024, _MAX_BYTES=16M) against the default, 4 – 32 MB.
# Build: make gpu-bundle-four; the afdc2a3 library as .gpuz/old.so; carry .gpuz.
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
el "4 ranks AllReduce float 1 - 32 MB"
S=(-g 4 -t allreduce -d float -b 1M -e 32M -f 2 -w 5 -n 30 -G 10 -c 1 -p 0)
run g4-nccl "${R[@]}" $CB "${S[@]}"
run g4-old "${O[@]}" $CB "${S[@]}"
run g4-new "${W[@]}" $CB "${S[@]}"
run g4-old2 "${O[@]}" $CB "${S[@]}"
run g4-new2 "${W[@]}" $CB "${S[@]}"
run g4-nccl2 "${R[@]}" $CB "${S[@]}"
el "4 ranks bfloat16 in place 2 - 16 MB"
run bf4 "${W[@]}" $CB -g 4 -t allreduce -d bfloat16 -b 2M -e 16M -f 2 -w 2 -n 3 -G 3 -c 1 -p 1
el "3 ranks AllReduce float 4 - 32 MB: default / 96x1024 to 16M"
S=(-g 3 -t allreduce -d float -b 4M -e 32M -f 2 -w 5 -n 30 -G 10 -c 1 -p 0)
E=(WEFT_ALLREDUCE_LL2_LARGE_SHAPE=96x1024 WEFT_ALLREDUCE_LL2_LARGE_MAX_BYTES=16M)
run g3-nccl "${R[@]}" $CB "${S[@]}"
run g3-new "${W[@]}" $CB "${S[@]}"
run g3-env "${W[@]}" "${E[@]}" $CB "${S[@]}"
run g3-new2 "${W[@]}" $CB "${S[@]}"
run g3-env2 "${W[@]}" "${E[@]}" $CB "${S[@]}"
run g3-nccl2 "${R[@]}" $CB "${S[@]}"
el ratios
python3 scripts/cbench-ratios.py "$OUT"/logs/g4-nccl.log "$OUT"/logs/g4-nccl2.log "$OUT"/logs/g4-old.log "$OUT"/logs/g4-new.log "$OUT"/logs/g4-old2.log "$OUT"/logs/g4-new2.log
python3 scripts/cbench-ratios.py "$OUT"/logs/g3-nccl.log "$OUT"/logs/g3-nccl2.log "$OUT"/logs/g3-new.log "$OUT"/logs/g3-env.log "$OUT"/logs/g3-new2.log "$OUT"/logs/g3-env2.log
grep -H "wrong elements" "$OUT"/logs/*.log | grep -v " 0 wrong"
grep -H -i "error\|fail\|timeout" "$OUT"/logs/*.log | head -20
el done
} >"$OUT/ll2large.txt" 2>&1
tar -czf "$OUT/logs.tar.gz" -C "$OUT" logs && rm -rf "$OUT/logs"
cat "$OUT/ll2large.txt"
