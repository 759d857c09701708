#!/usr/bin/env bash
# Call 9 (2026-11-27, twenty-third session, 4×H100 `nvidia-h100-x4`): the new default — a second
# two-phase LL AllReduce of 160 × 512 above 4 MiB to 8 MiB on 4 ranks (Config.LL2Large) — against
# the previous build (HEAD afdc2a3, .gpuz/old.so) and NCCL (first and last), float 3 – 14 MB
# (3/6, 4/8, 5/10, 7/14 MB: 10 and 14 MB on the ring, unchanged), alternated twice; bfloat16 and
# float in place 5 – 8 MB (0 wrong).
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
{
make -B -C examples/cbench CFLAGS='-O2 -Wall' >/dev/null 2>&1 || make -B -C examples/cbench CFLAGS='-O2 -Wall' OMP= >/dev/null
el "4 ranks AllReduce float 3 - 14 MB"
for v in nccl old new old2 new2 nccl2; do
  case $v in nccl*) L=("${R[@]}");; old*) L=("${O[@]}");; *) L=("${W[@]}");; esac
  : >"$OUT/logs/$v.log"
  for b in 3M 4M 5M 7M; do
    timeout 60 "${L[@]}" $CB -g 4 -t allreduce -d float -b $b -e $(( $(numfmt --from=iec $b) * 2 )) -f 2 -w 5 -n 40 -G 10 -c 1 -p 0 >>"$OUT/logs/$v.log" 2>&1
  done
  echo "$v $(grep -cE '^ +[0-9]+ .* 0 +-' "$OUT/logs/$v.log") rows with 0 wrong"
done
el "in place, bfloat16 and float, 5 - 8 MB"
for d in bfloat16 float; do
  timeout 60 "${W[@]}" $CB -g 4 -t allreduce -d $d -b 5M -e 8M -f 2 -w 2 -n 3 -G 3 -c 1 -p 1 >"$OUT/logs/ip-$d.log" 2>&1
  timeout 60 "${W[@]}" $CB -g 4 -t allreduce -d $d -b 6M -e 8M -f 2 -w 2 -n 3 -G 3 -c 1 -p 1 >>"$OUT/logs/ip-$d.log" 2>&1
  echo "ip-$d: $(grep -E '^ +[0-9]' "$OUT/logs/ip-$d.log" | awk '{printf "%s oop %s ip %s; ", $1, $9, $13}')"
done
el ratios
python3 scripts/cbench-ratios.py "$OUT"/logs/nccl.log "$OUT"/logs/nccl2.log "$OUT"/logs/old.log "$OUT"/logs/new.log "$OUT"/logs/old2.log "$OUT"/logs/new2.log
grep -H "wrong elements" "$OUT"/logs/*.log
grep -H -i "error\|fail\|timeout" "$OUT"/logs/*.log | head -20
el done
} >"$OUT/confirm.txt" 2>&1
tar -czf "$OUT/logs.tar.gz" -C "$OUT" logs && rm -rf "$OUT/logs"
cat "$OUT/confirm.txt"
