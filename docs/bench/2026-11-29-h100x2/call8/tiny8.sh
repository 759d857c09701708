#!/usr/bin/env bash
# Call 8 (2026-11-29, 2×H100): the partial LL unit's loads issued back to back (ld_plain_unit,
# ld_bytes unrolled and predicated). Every type through the C ABI at 8 B – 32 KB (AllGather,
# ReduceScatter, AlltoAll, AllReduce, Broadcast; checked), then AllGather, ReduceScatter and
# AlltoAll of 8 B and 16 B, one size per run, weft beside NCCL, bfloat16 and float.
set -u
tar -xzf .gpuz/bundle.tgz
export NCCL_NVLS_ENABLE=0; unset WEFT_NVLS
export WEFT_REQUIRE=nvlink
CB=examples/cbench/cbench
make -B -C examples/cbench CFLAGS='-O2 -Wall' >/dev/null 2>&1 || make -B -C examples/cbench CFLAGS='-O2 -Wall' OMP= >/dev/null
W=(LD_PRELOAD=$PWD/.gpu/libweft_nccl.so WEFT_NCCL_FALLBACK=0)
{
echo "== weft every type, 8 B – 32 KB"
timeout 120 env "${W[@]}" $CB -g 2 -t allgather,reducescatter,alltoall,allreduce,broadcast -d all -b 8 -e 32K -f 4 -w 2 -n 5 -G 2 -c 1 -p 0 2>&1 | grep -E "wrong elements|rror"
for rep in 1 2; do for d in bfloat16 float; do for t in allgather reducescatter alltoall; do for b in 8 16; do
  n=$(timeout 20 env -u LD_PRELOAD $CB -g 2 -t $t -d $d -b $b -e $b -w 5 -n 20 -G 10 -c 1 -p 0 2>&1 | grep -E "^ +[0-9]" | awk '{print $6, $9}')
  w=$(timeout 20 env "${W[@]}" $CB -g 2 -t $t -d $d -b $b -e $b -w 5 -n 20 -G 10 -c 1 -p 0 2>&1 | grep -E "^ +[0-9]" | awk '{print $6, $9}')
  echo "$rep $d $t $b nccl $n weft $w"
done; done; done; done
} >"$OUT/tiny8.txt" 2>&1
cat "$OUT/tiny8.txt"
