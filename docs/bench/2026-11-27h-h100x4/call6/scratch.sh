#!/usr/bin/env bash
# Call 6 (2026-11-27, twenty-second session, 4×H100 `nvidia-h100-x4`, 3 of its GPUs): why the
# 3-rank Reduce of 128–512 KB, a plan this session did not change, ran 0.3–0.6 µs slower on the
# new build (call 3). Hypothesis: the communicator's scratch grew with the two-phase LL AllReduce
# bound of 8 MiB. The session's first build (423df11, .gpuz/base.so) with and without that bound by
# environment, the final build with and without it cut back to 2 MiB; two alternations.
# Build: make gpu-bundle-four; the 423df11 library as .gpuz/base.so; carry .gpuz.
set -u
T0=$(date +%s)
tar -xzf .gpuz/bundle.tgz
export NCCL_NVLS_ENABLE=0; unset WEFT_NVLS
export WEFT_REQUIRE=nvlink
B=.gpu; CB=examples/cbench/cbench
W=(env LD_PRELOAD=$PWD/$B/libweft_nccl.so WEFT_NCCL_FALLBACK=0 WEFT_DEBUG=WARN)
O=(env LD_PRELOAD=$PWD/.gpuz/base.so WEFT_NCCL_FALLBACK=0 WEFT_DEBUG=WARN)
R=(env -u LD_PRELOAD NCCL_DEBUG=WARN)
mkdir -p "$OUT/logs"
el() { echo "== $(( $(date +%s) - T0 )) s: $*"; }
run() { local n=$1; shift; timeout 100 "$@" >"$OUT/logs/$n.log" 2>&1; echo "$n rc=$? $(grep -c ' 0 wrong' "$OUT/logs/$n.log") ok lines"; }
{
make -B -C examples/cbench CFLAGS='-O2 -Wall' >/dev/null 2>&1 || make -B -C examples/cbench CFLAGS='-O2 -Wall' OMP= >/dev/null
S=(-g 3 -t reduce,broadcast -d float -b 64K -e 1M -f 2 -w 5 -n 50 -G 10 -c 1 -p 0)
run nccl "${R[@]}" $CB "${S[@]}"
for i in 1 2; do
  run base$i "${O[@]}" $CB "${S[@]}"
  run base8m$i "${O[@]}" WEFT_ALLREDUCE_LL2_MAX_BYTES=8M $CB "${S[@]}"
  run new$i "${W[@]}" $CB "${S[@]}"
  run new2m$i "${W[@]}" WEFT_ALLREDUCE_LL2_MAX_BYTES=2M $CB "${S[@]}"
done
el ratios
python3 scripts/cbench-ratios.py "$OUT"/logs/nccl.log "$OUT"/logs/base1.log "$OUT"/logs/base8m1.log "$OUT"/logs/new1.log "$OUT"/logs/new2m1.log "$OUT"/logs/base2.log "$OUT"/logs/base8m2.log "$OUT"/logs/new2.log "$OUT"/logs/new2m2.log
for f in base1 base8m1 new1 new2m1 base2 base8m2 new2 new2m2; do echo -n "$f reduce us: "; awk '/^# reduce$/{p=1;next} /^# /{if($2!="size(B)")p=0} p&&$1>0{printf "%s ", $6}' "$OUT/logs/$f.log"; echo; done
grep -H "wrong elements" "$OUT"/logs/*.log | grep -v " 0 wrong"
el done
} >"$OUT/scratch.txt" 2>&1
tar -czf "$OUT/logs.tar.gz" -C "$OUT" logs && rm -rf "$OUT/logs"
cat "$OUT/scratch.txt"
