#!/usr/bin/env bash
# Call 6 (2026-11-27l): the acceptance's host-cost sweep (-H 1, bfloat16, 8 B - 128 MB, the order
# of call 4: allreduce, allgather with the copy-engine AllGather at 128 MB, reducescatter, sendrecv)
# through this build and d0d38d5, alternated twice (call 4 had ReduceScatter at 25-31 µs a call,
# call 5 with ReduceScatter alone at 11-13), then the acceptance's second part
# (PARTS="bench port algo fsdp"). Run from the repository root with .gpuz carried.
set -u
tar -xzf .gpuz/bundle.tgz
B=$PWD/.gpu
P=$OUT/printed.txt
exec > >(tee -a "$P") 2>&1
export NCCL_NVLS_ENABLE=0; unset WEFT_NVLS
CB=examples/cbench/cbench
gcc -O2 -I/usr/local/cuda/include -o $CB $CB.c -L/usr/local/cuda/lib64 -Wl,-rpath,/usr/local/cuda/lib64 -l:libnccl.so.2 -lcudart -ldl -lm || exit 1
CBH=(-g 2 -t allreduce,allgather,reducescatter,sendrecv -d bfloat16 -b 8 -e 128M -f 64 -w 5 -n 50 -G 0 -c 1 -p 0 -H 1)
for rep in 1 2; do
  for lib in new old; do
    L=$B/libweft_nccl.so; [ $lib = old ] && L=$PWD/.gpuz/libweft_nccl-old.so
    echo "-- $lib host sweep $rep (size oop host)"
    timeout 60 env LD_PRELOAD=$L WEFT_NCCL_FALLBACK=0 WEFT_PROXY_PROFILE=1 $CB "${CBH[@]}" > /tmp/o.txt 2>&1
    grep -E "^# [a-z]+$|^ +[0-9]+ " /tmp/o.txt | awk '/^#/{printf "\n%s:", $2; next} {printf " %s %s/%s", $1, $6, $NF}'; echo
    grep -o 'stage="driver launch[^"]*" n=[0-9]* mean=[^ ]* p50=[^ ]* p90=[^ ]*' /tmp/o.txt | head -1
  done
done
echo "== acceptance part 2"
PARTS="bench port algo fsdp" BUDGET=360 OUT=$OUT/accept bash .gpu/gpu-accept.sh > /tmp/accept.txt 2>&1
tail -n 25 /tmp/accept.txt
