#!/usr/bin/env bash
# Call 2 (2026-11-29, 2×H100): symmetric memory windows (ncclCommWindowRegister with
# NCCL_WIN_COLL_SYMMETRIC) through the NCCL ABI. TestWindowAllReduceNVLink and
# TestCEAllReduceNVLink (the staged copy-engine AllReduce and the zero-copy form, first GPU run
# since the AG landing split), then cbench -R 2 (ncclMemAlloc'd buffers registered as symmetric
# windows, NCCL 2.28.3 registering them too: its symmetric kernels) beside NCCL: AllReduce
# 64 MB – 1 GB float and bfloat16 (weft's default: the zero-copy copy-engine AllReduce from 1 GiB;
# and from 256 MiB), the -R 0 default beside it; then AllReduce, AllGather and ReduceScatter
# 8 B – 1 GB under -R 2 (NCCL's symmetric kernels against weft's plans).
set -u
tar -xzf .gpuz/bundle.tgz
export NCCL_NVLS_ENABLE=0; unset WEFT_NVLS
export WEFT_REQUIRE=nvlink
{
timeout 150 .gpu/weft.test -test.run 'TestWindowAllReduceNVLink|TestCEAllReduceNVLink' -test.v 2>&1 | grep -E "^(---|ok|FAIL|PASS)|wrong|rror" | head -20
} >"$OUT/test2.txt" 2>&1
cat "$OUT/test2.txt"
CB=examples/cbench/cbench
make -B -C examples/cbench CFLAGS='-O2 -Wall' >/dev/null 2>&1 || make -B -C examples/cbench CFLAGS='-O2 -Wall' OMP= >/dev/null
run() { # name, env..., then cbench args after --
  local name=$1; shift
  local v=(); while [ "$1" != -- ]; do v+=("$1"); shift; done; shift
  echo "== $name"
  timeout 90 env "${v[@]}" $CB -g 2 -t allreduce -b 64M -e 1G -f 4 -w 5 -n 20 -G 10 -c 1 -p 0 "$@" 2>&1 | grep -E "^ +[0-9]|wrong|rror|window_calls"
}
W=(LD_PRELOAD=$PWD/.gpu/libweft_nccl.so WEFT_NCCL_FALLBACK=0 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT)
{
for rep in 1 2; do for d in bfloat16 float; do
  run "nccl -R 2 $d $rep" -u LD_PRELOAD -- -d $d -R 2
  run "weft -R 2 $d $rep" "${W[@]}" -- -d $d -R 2
  run "weft -R 2 CE from 256M $d $rep" "${W[@]}" WEFT_CE_ALLREDUCE_MIN_BYTES=256M -- -d $d -R 2
  run "weft -R 0 $d $rep" "${W[@]}" -- -d $d -R 0
done; done
} >"$OUT/ar2.txt" 2>&1
grep -v "window_calls" "$OUT/ar2.txt"; grep "window_calls" "$OUT/ar2.txt" | grep -o "rank=[0-9] nranks=2.*window_calls=[0-9]*" | sort | uniq -c
{
for t in allreduce allgather reducescatter; do
  run "nccl -R 2 $t" -u LD_PRELOAD -- -d bfloat16 -R 2 -t $t -b 8 -e 1G -f 8
  run "weft -R 2 $t" "${W[@]}" -- -d bfloat16 -R 2 -t $t -b 8 -e 1G -f 8
done
} >"$OUT/sweep2.txt" 2>&1
grep -v "window_calls" "$OUT/sweep2.txt"
