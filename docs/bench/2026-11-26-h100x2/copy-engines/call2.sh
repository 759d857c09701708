#!/usr/bin/env bash
# Copy engines, second call: lanes 2 (default) vs 1, the 2PR AllReduce at 8 and 16 blocks of 1024
# threads with 32 MiB windows, checks, MoE both paths. Run from the repository root.
set -u
source scripts/steps.sh
B=$ROOT/.gpu-ce
BUDGET=${BUDGET:-150}
STEPS=${STEPS:-"ar ag check moe"}
export NCCL_NVLS_ENABLE=0
unset WEFT_NVLS
export WEFT_REQUIRE=nvlink
export WEFT_CACHE_DIR=$WORK/cache
{ date -u; nvidia-smi -L; } >"$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt"
rows() { grep -E "^ +[0-9]+ " $log | awk '{print $1, $8, $15, $20, $22}' ; }
W=$B/weft
if want ar; then
  step ce-all_reduce-b8 25 'rows' -- env WEFT_ALGO=port $W bench all_reduce --raw -b 64M -e 1G -f 2 -n 10 -w 3 -c 0 --baseline nccl --nproc 2
  step ce-all_reduce-b16 25 'rows' -- env WEFT_ALGO=port $B/weft-b16 bench all_reduce --raw -b 64M -e 1G -f 2 -n 10 -w 3 -c 0 --baseline nccl --nproc 2
  step sm-all_reduce 20 'rows' -- $W bench all_reduce -b 64M -e 1G -f 2 -n 10 -w 3 -c 0 --baseline nccl --nproc 2
fi
if want ag; then
  step ce-all_gather 20 'rows' -- env WEFT_ALGO=port $W bench all_gather -b 64M -e 1G -f 2 -n 10 -w 3 -c 0 --baseline nccl --nproc 2
  step ce1-all_gather 20 'rows' -- env WEFT_ALGO=port WEFT_CE_LANES=1 $W bench all_gather -b 64M -e 1G -f 2 -n 10 -w 3 -c 0 --baseline nccl --nproc 2
  step ce-alltoall 20 'rows' -- env WEFT_ALGO=port $W bench alltoall -b 64M -e 1G -f 2 -n 10 -w 3 -c 0 --baseline nccl --nproc 2
  step sm-all_gather 20 'rows' -- $W bench all_gather -b 64M -e 1G -f 2 -n 10 -w 3 -c 0 --baseline nccl --nproc 2
fi
if want check; then
  step check-all_reduce 25 'grep -E "^ +[0-9]+ " $log | awk "{print \$1, \$9, \$13}" | tr "\n" " "' -- env WEFT_ALGO=port $W bench all_reduce --raw -b 1M -e 256M -f 16 -n 3 -w 2 -c 1 -d bfloat16 --nproc 2
  step check-alltoall 20 'grep -E "^ +[0-9]+ " $log | awk "{print \$1, \$9, \$13}" | tr "\n" " "' -- env WEFT_ALGO=port $W bench alltoall -b 1M -e 64M -f 8 -n 3 -w 2 -c 1 -d bfloat16 --nproc 2
fi
if want moe; then
  step moe-port 25 'tail -n 3 $log' -- "$B/moe" -n 2 -tokens 4096 -hidden 7168 -topk 8 -experts 64 -iters 10 -warmup 3 -port
  step moe-port-b8 25 'tail -n 3 $log' -- "$B/moe" -n 2 -tokens 4096 -hidden 7168 -topk 8 -experts 64 -iters 10 -warmup 3 -port -blocks 8
  step moe-port-l1 25 'tail -n 3 $log' -- env WEFT_CE_LANES=1 "$B/moe" -n 2 -tokens 4096 -hidden 7168 -topk 8 -experts 64 -iters 10 -warmup 3 -port
  step moe 25 'tail -n 3 $log' -- "$B/moe" -n 2 -tokens 4096 -hidden 7168 -topk 8 -experts 64 -iters 10 -warmup 3
fi
for f in "$L"/*.log; do echo "=== $(basename "$f" .log)"; cat "$f"; done >"$OUT/all.log"
save
echo "== summary"; cat "$OUT/summary.txt"
