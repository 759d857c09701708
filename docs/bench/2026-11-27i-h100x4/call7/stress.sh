#!/usr/bin/env bash
# Call 7: call 6 saw 92 wrong elements in one of three cbench runs of the two-phase LL AllReduce at
# 8 MB on 4 ranks with WEFT_ALLREDUCE_LL2_LARGE_SHAPE=256x512 (the first, checked, launch of that
# plan). Stress: many sizes, each checked (every element) on its first call, through Comm.Launch
# (weft bench --raw), 4 ranks: the default plans, the 256 x 512 plan with LL128 lines and with
# LL16 packets, and cbench repeated at 8 MB (each run's checked call is the plan's first launch).
set -u
T0=$(date +%s)
tar -xzf .gpuz/bundle.tgz
export NCCL_NVLS_ENABLE=0; unset WEFT_NVLS
export WEFT_REQUIRE=nvlink
B=$PWD/.gpu; CB=examples/cbench/cbench
mkdir -p "$OUT/logs"
el() { echo "== $(( $(date +%s) - T0 )) s: $*"; }
wb() { local n=$1; shift; timeout 100 env "$@" $B/weft run --nproc 4 -- $B/weft bench all_reduce --raw --hal nvlink -b 1048816 -e 8388608 -i 98304 -w 1 -n 2 >"$OUT/logs/$n.log" 2>&1; echo "$n rc=$? rows=$(grep -cE '^ +[0-9]' "$OUT/logs/$n.log") wrong-rows=$(awk '$1 ~ /^[0-9]+$/ && ($9 != 0 || $13 != 0)' "$OUT/logs/$n.log" | wc -l)"; }
{
make -B -C examples/cbench CFLAGS='-O2 -Wall' >/dev/null 2>&1 || make -B -C examples/cbench CFLAGS='-O2 -Wall' OMP= >/dev/null
el "weft bench --raw 1-8 MB, 72 sizes, each checked"
wb default WEFT_DEBUG=WARN
wb s256 WEFT_DEBUG=WARN WEFT_ALLREDUCE_LL2_LARGE_SHAPE=256x512
wb s256-ll16 WEFT_DEBUG=WARN WEFT_LL128=0 WEFT_ALLREDUCE_LL2_MAX_BYTES=4M WEFT_ALLREDUCE_LL2_LARGE_MAX_BYTES=8M WEFT_ALLREDUCE_LL2_LARGE_SHAPE=256x512
wb default2 WEFT_DEBUG=WARN
wb s256b WEFT_DEBUG=WARN WEFT_ALLREDUCE_LL2_LARGE_SHAPE=256x512
el "cbench 4 + 8 MB, 8 runs each: default, 256 x 512"
for i in 1 2 3 4 5 6 7 8; do
  for v in default s256; do
    E=(); [ $v = s256 ] && E=(WEFT_ALLREDUCE_LL2_LARGE_SHAPE=256x512)
    timeout 60 env LD_PRELOAD=$B/libweft_nccl.so WEFT_NCCL_FALLBACK=0 WEFT_DEBUG=WARN "${E[@]}" $CB -g 4 -t allreduce -d float -b 4M -e 8M -f 2 -w 1 -n 2 -G 0 -c 1 -p 1 >"$OUT/logs/cb-$v-$i.log" 2>&1
    echo "cb-$v-$i rc=$? $(grep -E '^ +8388608' "$OUT/logs/cb-$v-$i.log" | awk '{print "oop wrong", $9, "ip wrong", $13}')"
  done
done
el done
} >"$OUT/stress.txt" 2>&1
tar -czf "$OUT/logs.tar.gz" -C "$OUT" logs && rm -rf "$OUT/logs"
cat "$OUT/stress.txt"
