#!/usr/bin/env bash
# Call 1 (2026-11-29, 2×H100): the copy-engine AllReduce through the NCCL ABI in its pulled form
# (each rank's reduction stores its window twice, into its output and an export slot; the peers'
# copy engines pull the export slots into their outputs; no SM copy-out). Conformance
# stream-reduce (the reduction's second destination on the GPU), TestCEAllReduceNVLink, then
# AllReduce 256 MB – 1 GB through the C ABI (cbench, CUDA graphs, checked) beside NCCL and weft's
# SM default, float and bfloat16, twice alternated; then shapes at bf16.
set -u
tar -xzf .gpuz/bundle.tgz
export NCCL_NVLS_ENABLE=0; unset WEFT_NVLS
export WEFT_REQUIRE=nvlink
{
timeout 90 .gpu/weft conformance --hal nvlink --ranks 2 --run memory-mapped/stream-reduce,memory-mapped/stream-ops 2>&1 | tail -4
timeout 100 .gpu/weft.test -test.run 'TestCEAllReduceNVLink' -test.v 2>&1 | grep -E "^(---|ok|FAIL|PASS)|wrong" | head
} >"$OUT/test1.txt" 2>&1
cat "$OUT/test1.txt"
CB=examples/cbench/cbench
make -B -C examples/cbench CFLAGS='-O2 -Wall' >/dev/null 2>&1 || make -B -C examples/cbench CFLAGS='-O2 -Wall' OMP= >/dev/null
run() { # name, env..., then cbench args after --
  local name=$1; shift
  local v=(); while [ "$1" != -- ]; do v+=("$1"); shift; done; shift
  echo "== $name"
  timeout 60 env "${v[@]}" $CB -g 2 -t allreduce -b 256M -e 1G -f 2 -w 5 -n 20 -G 10 -c 1 -p 0 "$@" 2>&1 | grep -E "^ +[0-9]|wrong|rror"
}
W=(LD_PRELOAD=$PWD/.gpu/libweft_nccl.so WEFT_NCCL_FALLBACK=0)
{
for rep in 1 2; do for d in bfloat16 float; do
  run "nccl $d $rep" -u LD_PRELOAD -- -d $d
  run "weft SM $d $rep" "${W[@]}" -- -d $d
  run "weft ce $d $rep" "${W[@]}" WEFT_ALGO=ce -- -d $d
done; done
run "weft ce w128M bfloat16" "${W[@]}" WEFT_ALGO=ce WEFT_CE_ALLREDUCE_SHAPE=32x512w128M -- -d bfloat16
run "weft ce 64x512 bfloat16" "${W[@]}" WEFT_ALGO=ce WEFT_CE_ALLREDUCE_SHAPE=64x512w64M -- -d bfloat16
run "weft ce 16x1024 bfloat16" "${W[@]}" WEFT_ALGO=ce WEFT_CE_ALLREDUCE_SHAPE=16x1024w64M -- -d bfloat16
run "weft ce w32Md3 bfloat16" "${W[@]}" WEFT_ALGO=ce WEFT_CE_ALLREDUCE_SHAPE=32x512w32Md3 -- -d bfloat16
run "weft ce in place, max, bfloat16" "${W[@]}" WEFT_ALGO=ce -- -d bfloat16 -p 1 -o max -b 64M
} >"$OUT/ar1.txt" 2>&1
cat "$OUT/ar1.txt"
