#!/usr/bin/env bash
# Call 5 (2026-11-28, 2×H100): the copy-engine AllReduce v3 (uniform windows, flag operations
# batched by default, K landing slots per peer) under window and slot counts, bfloat16 64 MB –
# 1 GB through the C ABI (cbench, CUDA graphs, checked), NCCL and weft's SM default beside;
# TestCEAllReduceNVLink first.
set -u
tar -xzf .gpuz/bundle.tgz
export NCCL_NVLS_ENABLE=0; unset WEFT_NVLS
export WEFT_REQUIRE=nvlink
timeout 100 .gpu/weft.test -test.run 'TestCEAllReduceNVLink' -test.v 2>&1 | grep -E "^(---|ok|FAIL|PASS)|wrong" | head >"$OUT/test5.txt"
cat "$OUT/test5.txt"
CB=examples/cbench/cbench
make -B -C examples/cbench CFLAGS='-O2 -Wall' >/dev/null 2>&1 || make -B -C examples/cbench CFLAGS='-O2 -Wall' OMP= >/dev/null
run() { # name, env..., then cbench args after --
  local name=$1; shift
  local v=(); while [ "$1" != -- ]; do v+=("$1"); shift; done; shift
  echo "== $name"
  timeout 60 env "${v[@]}" $CB -g 2 -t allreduce "$@" -b 64M -e 1G -f 4 -w 5 -n 20 -G 10 -c 1 -p 0 2>&1 | grep -E "^ +[0-9]|wrong|rror"
}
W=(LD_PRELOAD=$PWD/.gpu/libweft_nccl.so WEFT_NCCL_FALLBACK=0)
C=("${W[@]}" WEFT_ALGO=ce)
{
run "nccl" -u LD_PRELOAD -- -d bfloat16
run "weft default (SM)" "${W[@]}" -- -d bfloat16
run "ce 64M d2" "${C[@]}" -- -d bfloat16
run "ce 64M d3" "${C[@]}" WEFT_CE_ALLREDUCE_SHAPE=32x512w64Md3 -- -d bfloat16
run "ce 32M d4" "${C[@]}" WEFT_CE_ALLREDUCE_SHAPE=32x512w32Md4 -- -d bfloat16
run "ce 16M d8" "${C[@]}" WEFT_CE_ALLREDUCE_SHAPE=32x512w16Md8 -- -d bfloat16
run "ce 32M d2" "${C[@]}" WEFT_CE_ALLREDUCE_SHAPE=32x512w32Md2 -- -d bfloat16
run "ce 64M d2 unbatched" "${C[@]}" WEFT_STREAM_BATCH=0 -- -d bfloat16
run "nccl (again)" -u LD_PRELOAD -- -d bfloat16
run "weft default (SM, again)" "${W[@]}" -- -d bfloat16
} >"$OUT/ar5.txt" 2>&1
cat "$OUT/ar5.txt"
