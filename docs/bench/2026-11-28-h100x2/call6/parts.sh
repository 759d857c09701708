#!/usr/bin/env bash
# Call 6 (2026-11-28, 2×H100): where the copy-engine AllReduce's time goes. The same build with
# one part removed (diagnostic builds, wrong results, so unchecked: -c 0): no reduction kernel
# (noreduce), no copy-out of the peers' reduced windows (nocopyout), neither (both); bfloat16
# 256 MB – 1 GB through the C ABI, CUDA graphs; NCCL and weft's SM default beside.
set -u
tar -xzf .gpuz/bundle.tgz
export NCCL_NVLS_ENABLE=0; unset WEFT_NVLS
CB=examples/cbench/cbench
make -B -C examples/cbench CFLAGS='-O2 -Wall' >/dev/null 2>&1 || make -B -C examples/cbench CFLAGS='-O2 -Wall' OMP= >/dev/null
cp .gpu/libweft_nccl.so /tmp/lib-real.so
for v in noreduce nocopyout both; do gunzip -c .gpuz/v/lib-$v.so.gz >/tmp/lib-$v.so; done
run() { # name, lib, env...
  local name=$1 lib=$2; shift 2
  echo "== $name"
  timeout 60 env LD_PRELOAD=$lib WEFT_NCCL_FALLBACK=0 "$@" $CB -g 2 -t allreduce -d bfloat16 -b 256M -e 1G -f 4 -w 5 -n 20 -G 10 -c 0 -p 0 2>&1 | grep -E "^ +[0-9]|rror"
}
{
echo "== nccl"; timeout 60 env -u LD_PRELOAD $CB -g 2 -t allreduce -d bfloat16 -b 256M -e 1G -f 4 -w 5 -n 20 -G 10 -c 0 -p 0 2>&1 | grep -E "^ +[0-9]|rror"
run "weft SM default" /tmp/lib-real.so
run "ce" /tmp/lib-real.so WEFT_ALGO=ce
for v in noreduce nocopyout both; do run "ce $v" /tmp/lib-$v.so WEFT_ALGO=ce; done
run "ce 32M" /tmp/lib-real.so WEFT_ALGO=ce WEFT_CE_ALLREDUCE_SHAPE=32x512w32M
run "ce 32M both" /tmp/lib-both.so WEFT_ALGO=ce WEFT_CE_ALLREDUCE_SHAPE=32x512w32M
run "ce (again)" /tmp/lib-real.so WEFT_ALGO=ce
} >"$OUT/parts.txt" 2>&1
cat "$OUT/parts.txt"
