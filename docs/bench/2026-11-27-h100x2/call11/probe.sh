#!/usr/bin/env bash
# Call 11 (2026-11-27, 2×H100): probes for the next session. (1) Is Nsight Systems on the host
# (a profile of the LL cycle's kernel side over the network)? (2) AllReduce bfloat16 at 512 MB
# and 1 GB through the C ABI with the large tier's block count varied (WEFT_ALLREDUCE: 128, 256
# and 64 blocks of 512 threads, u4; each block's part of a rank's chunk is contiguous, so the
# blocks' parts grow with the message): does weft's time per byte still rise from 512 MB to 1 GB?
set -u
tar -xzf .gpuz/bundle.tgz
export NCCL_NVLS_ENABLE=0; unset WEFT_NVLS
{ which nsys ncu nvprof; ls /usr/local/cuda/bin 2>/dev/null | tr '\n' ' '; ls -d /opt/nvidia/nsight* /usr/local/cuda/nsight* 2>/dev/null; } >"$OUT/tools.txt" 2>&1
CB=examples/cbench/cbench
make -B -C examples/cbench CFLAGS='-O2 -Wall' >/dev/null 2>&1 || make -B -C examples/cbench CFLAGS='-O2 -Wall' OMP= >/dev/null
for r in 1 2; do
  for b in 128 256 64; do
    echo "== weft 2pa-${b}x512-u4 rep $r"
    WEFT_ALLREDUCE="1pa-LL16-1x1024@4K,1pa-LL16-8x1024@128K,2pa-64x1024-u4@16M,2pa-${b}x512-u4" LD_PRELOAD=$PWD/.gpu/libweft_nccl.so WEFT_NCCL_FALLBACK=0 \
      timeout 60 $CB -g 2 -t allreduce -d bfloat16 -b 512M -e 1G -f 2 -w 5 -n 20 -G 10 -c 1 -p 0 2>&1 | grep -E "^ +[0-9]|wrong"
  done
  echo "== nccl rep $r"
  env -u LD_PRELOAD timeout 60 $CB -g 2 -t allreduce -d bfloat16 -b 512M -e 1G -f 2 -w 5 -n 20 -G 10 -c 1 -p 0 2>&1 | grep -E "^ +[0-9]|wrong"
done >"$OUT/blocks.txt" 2>&1
cat "$OUT/tools.txt" "$OUT/blocks.txt"
