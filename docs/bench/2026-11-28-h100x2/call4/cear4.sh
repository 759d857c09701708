#!/usr/bin/env bash
# Call 4 (2026-11-28, 2×H100): the copy-engine AllReduce v2 (windows ramping from W/32 at both
# ends of a shard) under window sizes, batched flag operations and reduction blocks, bfloat16
# 64 MB – 1 GB through the C ABI (cbench, CUDA graphs, checked), NCCL and weft's SM default beside;
# then the copy-engine AllGather with and without batched flag operations (256–512 MB).
set -u
tar -xzf .gpuz/bundle.tgz
export NCCL_NVLS_ENABLE=0; unset WEFT_NVLS
export WEFT_REQUIRE=nvlink
CB=examples/cbench/cbench
make -B -C examples/cbench CFLAGS='-O2 -Wall' >/dev/null 2>&1 || make -B -C examples/cbench CFLAGS='-O2 -Wall' OMP= >/dev/null
run() { # name, coll, range, env..., then cbench args after --
  local name=$1 coll=$2 b=$3 e=$4; shift 4
  local v=(); while [ "$1" != -- ]; do v+=("$1"); shift; done; shift
  echo "== $name"
  timeout 60 env "${v[@]}" $CB -g 2 -t $coll "$@" -b $b -e $e -f 4 -w 5 -n 20 -G 10 -c 1 -p 0 2>&1 | grep -E "^ +[0-9]|wrong|rror"
}
W=(LD_PRELOAD=$PWD/.gpu/libweft_nccl.so WEFT_NCCL_FALLBACK=0)
{
run "nccl" allreduce 64M 1G -u LD_PRELOAD -- -d bfloat16
run "weft default (SM)" allreduce 64M 1G "${W[@]}" -- -d bfloat16
run "ce 64M batch" allreduce 64M 1G "${W[@]}" WEFT_ALGO=ce WEFT_CE_ALLREDUCE_SHAPE=32x512w64M WEFT_STREAM_BATCH=1 -- -d bfloat16
run "ce 64M" allreduce 64M 1G "${W[@]}" WEFT_ALGO=ce WEFT_CE_ALLREDUCE_SHAPE=32x512w64M -- -d bfloat16
run "ce 32M batch" allreduce 64M 1G "${W[@]}" WEFT_ALGO=ce WEFT_CE_ALLREDUCE_SHAPE=32x512w32M WEFT_STREAM_BATCH=1 -- -d bfloat16
run "ce 64M batch 64 blocks" allreduce 64M 1G "${W[@]}" WEFT_ALGO=ce WEFT_CE_ALLREDUCE_SHAPE=64x512w64M WEFT_STREAM_BATCH=1 -- -d bfloat16
run "ce 64M batch 16x1024" allreduce 64M 1G "${W[@]}" WEFT_ALGO=ce WEFT_CE_ALLREDUCE_SHAPE=16x1024w64M WEFT_STREAM_BATCH=1 -- -d bfloat16
run "ce 64M batch float" allreduce 64M 1G "${W[@]}" WEFT_ALGO=ce WEFT_CE_ALLREDUCE_SHAPE=32x512w64M WEFT_STREAM_BATCH=1 -- -d float
run "nccl float" allreduce 64M 1G -u LD_PRELOAD -- -d float
run "nccl allgather" allgather 64M 256M -u LD_PRELOAD -- -d bfloat16
run "ce allgather" allgather 64M 256M "${W[@]}" -- -d bfloat16
run "ce allgather batch" allgather 64M 256M "${W[@]}" WEFT_STREAM_BATCH=1 -- -d bfloat16
} >"$OUT/ar4.txt" 2>&1
cat "$OUT/ar4.txt"
