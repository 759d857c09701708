#!/usr/bin/env bash
# Call 7 (2026-11-29, 2×H100): why AllGather, ReduceScatter and AlltoAll of 8 B take 4.1–4.5 µs
# through weft where 64 B take 3.6–3.7 (acceptance, calls 5–6). weft bench beside NCCL (the plan
# of each size printed), 8 B – 256 B, float and bfloat16; then cbench 8 B alone and 16 B alone.
set -u
tar -xzf .gpuz/bundle.tgz
export NCCL_NVLS_ENABLE=0; unset WEFT_NVLS
export WEFT_REQUIRE=nvlink
{
for c in all_gather reduce_scatter alltoall; do for d in bfloat16 float; do
  echo "== $c $d"
  timeout 40 .gpu/weft bench $c -b 8 -e 256 -f 2 -n 20 -w 5 -c 1 -d $d --baseline nccl --nproc 2 2>&1 | grep -E "^ +[0-9]|rror"
done; done
CB=examples/cbench/cbench
make -B -C examples/cbench CFLAGS='-O2 -Wall' >/dev/null 2>&1 || make -B -C examples/cbench CFLAGS='-O2 -Wall' OMP= >/dev/null
for b in 8 16 32; do
  echo "== cbench weft allgather $b alone"
  timeout 30 env LD_PRELOAD=$PWD/.gpu/libweft_nccl.so WEFT_NCCL_FALLBACK=0 $CB -g 2 -t allgather -d bfloat16 -b $b -e $b -w 5 -n 20 -G 10 -c 1 -p 0 2>&1 | grep -E "^ +[0-9]|rror"
done
} >"$OUT/tiny7.txt" 2>&1
cat "$OUT/tiny7.txt"
