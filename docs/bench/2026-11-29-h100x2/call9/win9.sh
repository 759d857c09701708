#!/usr/bin/env bash
# Call 9 (2026-11-29, 2×H100): the small sizes through symmetric windows after call 8's fix:
# AllGather and ReduceScatter of 8 B, 16 B and 64 B under cbench -R 2, one size per run, weft
# beside NCCL (its window kernels), bfloat16, twice alternated.
set -u
tar -xzf .gpuz/bundle.tgz
export NCCL_NVLS_ENABLE=0; unset WEFT_NVLS
CB=examples/cbench/cbench
make -B -C examples/cbench CFLAGS='-O2 -Wall' >/dev/null 2>&1 || make -B -C examples/cbench CFLAGS='-O2 -Wall' OMP= >/dev/null
W=(LD_PRELOAD=$PWD/.gpu/libweft_nccl.so WEFT_NCCL_FALLBACK=0)
{
for rep in 1 2; do for t in allgather reducescatter; do for b in 8 16 64; do
  n=$(timeout 20 env -u LD_PRELOAD $CB -g 2 -t $t -d bfloat16 -R 2 -b $b -e $b -w 5 -n 20 -G 10 -c 1 -p 0 2>&1 | grep -E "^ +[0-9]" | awk '{print $6, $9}')
  w=$(timeout 20 env "${W[@]}" $CB -g 2 -t $t -d bfloat16 -R 2 -b $b -e $b -w 5 -n 20 -G 10 -c 1 -p 0 2>&1 | grep -E "^ +[0-9]" | awk '{print $6, $9}')
  echo "$rep $t $b nccl $n weft $w"
done; done; done
} >"$OUT/win9.txt" 2>&1
cat "$OUT/win9.txt"
