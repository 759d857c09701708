#!/usr/bin/env bash
# Copy engines (issue 20 item 4): engine lanes, CE AllGather/AllToAll/2PR beside NCCL and the SM
# plans, MoE both paths. Run from the repository root; files back in $OUT.
set -u
source scripts/steps.sh
B=$ROOT/.gpu-ce
BUDGET=${BUDGET:-185}
STEPS=${STEPS:-"lanes ce sm check graph moe"}
export NCCL_NVLS_ENABLE=0
unset WEFT_NVLS
export WEFT_REQUIRE=nvlink
export WEFT_CACHE_DIR=$WORK/cache
{ date -u; hostname; nvidia-smi -L; nvidia-smi topo -m; nvidia-smi -q | grep -iE "driver version|cuda version" ; } >"$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt"
rows() { grep -E "^ +[0-9]+ " $log | awk '{print $1, $8, $15, $20, $22}' ; }
W=$B/weft
if want lanes; then
  step lanes-test 40 'grep -E "^(ok|PASS|FAIL|--- FAIL)" $log | tail -n 3' -- "$B/hal_nvlink.test" -test.count=1 -test.run 'TestPortTwoGPUsLanes|TestPortTwoGPUs$' -test.v
fi
if want ce; then
  step ce-all_gather 30 'rows' -- env WEFT_ALGO=port $W bench all_gather -b 64M -e 1G -f 2 -n 10 -w 3 -c 0 --baseline nccl --nproc 2
  step ce-alltoall 30 'rows' -- env WEFT_ALGO=port $W bench alltoall -b 64M -e 1G -f 2 -n 10 -w 3 -c 0 --baseline nccl --nproc 2
  step ce-all_reduce 30 'rows' -- env WEFT_ALGO=port $W bench all_reduce --raw -b 64M -e 1G -f 2 -n 10 -w 3 -c 0 --baseline nccl --nproc 2
fi
if want sm; then
  step sm-all_gather 25 'rows' -- $W bench all_gather -b 256M -e 1G -f 2 -n 10 -w 3 -c 0 --baseline nccl --nproc 2
  step sm-alltoall 25 'rows' -- $W bench alltoall -b 256M -e 1G -f 2 -n 10 -w 3 -c 0 --baseline nccl --nproc 2
  step sm-all_reduce 25 'rows' -- $W bench all_reduce -b 256M -e 1G -f 2 -n 10 -w 3 -c 0 --baseline nccl --nproc 2
fi
if want lanes; then
  step lanes-bench 40 'grep GB/s $log | wc -l' -- "$B/hal_nvlink.test" -test.run '^$' -test.bench EnginePut -test.benchtime 8x
fi
if want check; then
  for c in all_gather all_reduce; do
    raw=""; [ $c = all_reduce ] && raw=--raw
    step "check-$c" 30 'grep -E "^ +[0-9]+ " $log | awk "{print \$1, \$9, \$13}" | tr "\n" " "' -- env WEFT_ALGO=port $W bench $c $raw -b 1M -e 64M -f 8 -n 3 -w 2 -c 1 -d bfloat16 --nproc 2
  done
fi
if want graph; then
  step ce-graph-all_gather 25 'rows' -- env WEFT_ALGO=port $W bench all_gather -b 256M -e 1G -f 2 -n 4 -w 2 -G 3 -c 0 --baseline nccl --nproc 2
fi
if want moe; then
  step moe 40 'tail -n 4 $log' -- "$B/moe" -n 2 -tokens 4096 -hidden 7168 -topk 8 -experts 64 -iters 10 -warmup 3
  step moe-port 40 'tail -n 4 $log' -- "$B/moe" -n 2 -tokens 4096 -hidden 7168 -topk 8 -experts 64 -iters 10 -warmup 3 -port
fi
for f in "$L"/*.log; do echo "=== $(basename "$f" .log)"; cat "$f"; done >"$OUT/all.log"
save
echo "== summary"; cat "$OUT/summary.txt"
