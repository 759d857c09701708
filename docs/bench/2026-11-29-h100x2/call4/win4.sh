#!/usr/bin/env bash
# Call 4 (2026-11-29, 2×H100): symmetric windows, the LL bound. TestWindowAllReduceNVLink (every
# path through windows on the GPUs, sizes scaled ×16), then cbench -R 2 beside NCCL -R 2,
# bfloat16, 256 KB – 4 MB, AllReduce, AllGather, ReduceScatter: weft with WEFT_WINDOW_LL_MAX_BYTES
# at its default (1M), at 0 (the zero-copy/direct plans wherever they exist) and at 16M (Launch's
# LL plans kept wherever Launch has them), twice alternated.
set -u
tar -xzf .gpuz/bundle.tgz
export NCCL_NVLS_ENABLE=0; unset WEFT_NVLS
export WEFT_REQUIRE=nvlink
{
timeout 120 .gpu/weft.test -test.run 'TestWindowAllReduceNVLink' -test.v 2>&1 | grep -vE "^=== (RUN|PAUSE|CONT)" | head -30
} >"$OUT/test4.txt" 2>&1
cat "$OUT/test4.txt"
CB=examples/cbench/cbench
make -B -C examples/cbench CFLAGS='-O2 -Wall' >/dev/null 2>&1 || make -B -C examples/cbench CFLAGS='-O2 -Wall' OMP= >/dev/null
run() { # name, env..., then cbench args after --
  local name=$1; shift
  local v=(); while [ "$1" != -- ]; do v+=("$1"); shift; done; shift
  echo "== $name"
  timeout 60 env "${v[@]}" $CB -g 2 -b 256K -e 4M -f 2 -w 5 -n 20 -G 10 -c 1 -p 0 -d bfloat16 -R 2 "$@" 2>&1 | grep -E "^ +[0-9]|wrong|rror"
}
W=(LD_PRELOAD=$PWD/.gpu/libweft_nccl.so WEFT_NCCL_FALLBACK=0)
{
for rep in 1 2; do for t in allreduce allgather reducescatter; do
  run "nccl $t $rep" -u LD_PRELOAD -- -t $t
  run "weft ll1M $t $rep" "${W[@]}" -- -t $t
  run "weft ll0 $t $rep" "${W[@]}" WEFT_WINDOW_LL_MAX_BYTES=0 -- -t $t
  run "weft ll16M $t $rep" "${W[@]}" WEFT_WINDOW_LL_MAX_BYTES=16M -- -t $t
done; done
} >"$OUT/ll4.txt" 2>&1
cat "$OUT/ll4.txt" | head -5
