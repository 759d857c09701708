#!/usr/bin/env bash
# Call 3 (2026-11-29, 2×H100): symmetric windows, second step. Below the copy-engine bound an
# AllReduce through a window runs Comm.AllReduce's zero-copy kernel tiers where Launch would take
# an HB plan; AllGather and ReduceScatter through windows run the direct plans. Tests
# (TestWindowAllReduceNVLink: every path on the GPUs; TestAllReduceNVLink: Comm.AllReduce after
# the launchPeers refactor), then cbench -R 2 beside NCCL -R 2 (its symmetric kernels), bfloat16,
# 8 B – 1 GB, AllReduce, AllGather, ReduceScatter, twice alternated.
set -u
tar -xzf .gpuz/bundle.tgz
export NCCL_NVLS_ENABLE=0; unset WEFT_NVLS
export WEFT_REQUIRE=nvlink
{
timeout 170 .gpu/weft.test -test.run 'TestWindowAllReduceNVLink|TestAllReduceNVLink' -test.v 2>&1 | grep -E "^(---|ok|FAIL|PASS)|wrong|rror" | head -20
} >"$OUT/test3.txt" 2>&1
cat "$OUT/test3.txt"
CB=examples/cbench/cbench
make -B -C examples/cbench CFLAGS='-O2 -Wall' >/dev/null 2>&1 || make -B -C examples/cbench CFLAGS='-O2 -Wall' OMP= >/dev/null
run() { # name, env..., then cbench args after --
  local name=$1; shift
  local v=(); while [ "$1" != -- ]; do v+=("$1"); shift; done; shift
  echo "== $name"
  timeout 90 env "${v[@]}" $CB -g 2 -b 8 -e 1G -f 8 -w 5 -n 20 -G 10 -c 1 -p 0 -d bfloat16 -R 2 "$@" 2>&1 | grep -E "^ +[0-9]|wrong|rror|window_calls"
}
W=(LD_PRELOAD=$PWD/.gpu/libweft_nccl.so WEFT_NCCL_FALLBACK=0 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT)
{
for rep in 1 2; do for t in allreduce allgather reducescatter; do
  run "nccl -R 2 $t $rep" -u LD_PRELOAD -- -t $t
  run "weft -R 2 $t $rep" "${W[@]}" -- -t $t
done; done
} >"$OUT/sweep3.txt" 2>&1
grep -v "window_calls" "$OUT/sweep3.txt"; grep "window_calls" "$OUT/sweep3.txt" | grep -o "rank=0 nranks=2.*window_calls=[0-9]*"
