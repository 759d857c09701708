#!/usr/bin/env bash
# Call 5 (2026-11-27l): the host time per eager ReduceScatter call through libweft_nccl.so, this
# build against d0d38d5 (the 2026-11-27d acceptance's build: 11 µs a call where this one took
# 25-31 at 8 B - 32 KB bfloat16, call 4), alternated; AllGather beside; the plans weft bench picks.
# Run from the repository root with .gpuz carried (bundle.tgz, libweft_nccl-old.so, weft-old.gz).
set -u
tar -xzf .gpuz/bundle.tgz
B=$PWD/.gpu
P=$OUT/printed.txt
exec > >(tee -a "$P") 2>&1
export NCCL_NVLS_ENABLE=0; unset WEFT_NVLS
CB=examples/cbench/cbench
gcc -O2 -I/usr/local/cuda/include -o $CB $CB.c -L/usr/local/cuda/lib64 -Wl,-rpath,/usr/local/cuda/lib64 -l:libnccl.so.2 -lcudart -ldl -lm || exit 1
row() { grep -E "^ +[0-9]+ " | awk '{printf "%s oop %s host %s\n", $1, $6, $NF}'; }
for rep in 1 2; do
  for lib in new old; do
    L=$B/libweft_nccl.so; [ $lib = old ] && L=$PWD/.gpuz/libweft_nccl-old.so
    for t in reducescatter allgather; do
      for d in bfloat16 float; do
        echo "-- $lib $t $d (-H 1: host µs per call)"
        timeout 60 env LD_PRELOAD=$L WEFT_NCCL_FALLBACK=0 WEFT_PROXY_PROFILE=1 $CB -g 2 -t $t -d $d -b 8 -e 32K -f 64 -w 5 -n 200 -G 0 -c 1 -p 0 -H 1 > /tmp/o.txt 2>&1
        row < /tmp/o.txt; grep -o 'stage="[^"]*" n=[0-9]* mean=[^ ]* p50=[^ ]* p90=[^ ]*' /tmp/o.txt | grep -E "enqueue|driver launch|plan choice|weft Launch|program lookup|stream order" | sort | uniq | head -12
      done
    done
  done
done
echo "-- nccl reducescatter bfloat16"; env -u LD_PRELOAD $CB -g 2 -t reducescatter -d bfloat16 -b 8 -e 32K -f 64 -w 5 -n 200 -G 0 -c 1 -p 0 -H 1 | row
for w in new old; do
  W=$B/weft
  if [ $w = old ]; then gunzip -c $PWD/.gpuz/weft-old.gz > /tmp/weft-old && chmod +x /tmp/weft-old; W=/tmp/weft-old; fi
  echo "-- $w weft bench reduce_scatter bfloat16 plans"
  timeout 60 $W bench reduce_scatter --nproc 2 -b 8 -e 32K -f 64 -d bfloat16 -w 5 -n 50 --hal nvlink 2>&1 | grep -E '^ +[0-9]+ ' | tr -s ' ' | cut -d' ' -f2,7,10,11,12,13,14,15,16
done
