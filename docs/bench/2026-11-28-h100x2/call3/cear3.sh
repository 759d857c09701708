#!/usr/bin/env bash
# Call 3 (2026-11-28, 2×H100): why the copy-engine AllReduce of call 2 (cear.go v1) moves 266 GB/s
# at 1 GB where its copies alone move 390: bfloat16 AllReduce 64 MB – 1 GB through the C ABI
# (cbench, CUDA graphs, checked) under hardware-queue and window variations, NCCL beside.
set -u
tar -xzf .gpuz/bundle.tgz
export NCCL_NVLS_ENABLE=0; unset WEFT_NVLS
export WEFT_REQUIRE=nvlink
CB=examples/cbench/cbench
make -B -C examples/cbench CFLAGS='-O2 -Wall' >/dev/null 2>&1 || make -B -C examples/cbench CFLAGS='-O2 -Wall' OMP= >/dev/null
run() { # name, env..., then cbench args after --
  local name=$1; shift
  local e=(); while [ "$1" != -- ]; do e+=("$1"); shift; done; shift
  echo "== $name"
  timeout 60 env "${e[@]}" $CB -g 2 -t allreduce "$@" -b 64M -e 1G -f 4 -w 5 -n 20 -G 10 -c 1 -p 0 2>&1 | grep -E "^ +[0-9]|wrong|rror"
}
W=(LD_PRELOAD=$PWD/.gpu/libweft_nccl.so WEFT_NCCL_FALLBACK=0 WEFT_ALGO=ce)
{
run "nccl" -u LD_PRELOAD -- -d bfloat16
run "ce 16M" "${W[@]}" -- -d bfloat16
run "ce 16M maxconn32" "${W[@]}" CUDA_DEVICE_MAX_CONNECTIONS=32 -- -d bfloat16
run "ce 16M batch" "${W[@]}" WEFT_STREAM_BATCH=1 -- -d bfloat16
run "ce 32M" "${W[@]}" WEFT_CE_ALLREDUCE_SHAPE=32x512w32M -- -d bfloat16
run "ce 32M maxconn32" "${W[@]}" WEFT_CE_ALLREDUCE_SHAPE=32x512w32M CUDA_DEVICE_MAX_CONNECTIONS=32 -- -d bfloat16
run "ce 64M" "${W[@]}" WEFT_CE_ALLREDUCE_SHAPE=32x512w64M -- -d bfloat16
run "ce 64M 8 blocks" "${W[@]}" WEFT_CE_ALLREDUCE_SHAPE=8x512w64M -- -d bfloat16
run "ce 128M" "${W[@]}" WEFT_CE_ALLREDUCE_SHAPE=32x512w128M -- -d bfloat16
run "ce 64M maxconn1" "${W[@]}" WEFT_CE_ALLREDUCE_SHAPE=32x512w64M CUDA_DEVICE_MAX_CONNECTIONS=1 -- -d bfloat16
} >"$OUT/ar3.txt" 2>&1
cat "$OUT/ar3.txt"
