#!/usr/bin/env bash
# Copy engines, third call: in-place AllGather without the self-copy, the 2PR AllReduce over three
# engines per peer (8 and 4 blocks of 1024 threads, 32 MiB windows), checks. Repository root.
set -u
source scripts/steps.sh
B=$ROOT/.gpu-ce
BUDGET=${BUDGET:-85}
STEPS=${STEPS:-"test ar ag check"}
export NCCL_NVLS_ENABLE=0
unset WEFT_NVLS
export WEFT_REQUIRE=nvlink
export WEFT_CACHE_DIR=$WORK/cache
{ date -u; nvidia-smi -L; } >"$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt"
rows() { grep -E "^ +[0-9]+ " $log | awk '{print $1, $8, $12, $15, $20, $21, $22}' ; }
W=$B/weft
if want test; then
  step lanes-test 20 'grep -E "^(ok|PASS|FAIL|--- FAIL)" $log | tail -n 3' -- "$B/hal_nvlink.test" -test.count=1 -test.run 'TestPortTwoGPUsLanes' -test.v
fi
if want ar; then
  step ce-all_reduce-b8 15 'rows' -- env WEFT_ALGO=port $W bench all_reduce --raw -b 64M -e 1G -f 2 -n 10 -w 3 -c 0 --baseline nccl --nproc 2
  step ce-all_reduce-b4 15 'rows' -- env WEFT_ALGO=port $B/weft-b4 bench all_reduce --raw -b 64M -e 1G -f 2 -n 10 -w 3 -c 0 --baseline nccl --nproc 2
fi
if want ag; then
  step ce-all_gather 12 'rows' -- env WEFT_ALGO=port $W bench all_gather -b 256M -e 1G -f 2 -n 10 -w 3 -c 0 --baseline nccl --nproc 2
fi
if want check; then
  step check-all_reduce 15 'grep -E "^ +[0-9]+ " $log | awk "{print \$1, \$9, \$13}" | tr "\n" " "' -- env WEFT_ALGO=port $W bench all_reduce --raw -b 1M -e 256M -f 16 -n 3 -w 2 -c 1 -d bfloat16 --nproc 2
  step check-all_gather 12 'grep -E "^ +[0-9]+ " $log | awk "{print \$1, \$9, \$13}" | tr "\n" " "' -- env WEFT_ALGO=port $W bench all_gather -b 1M -e 256M -f 16 -n 3 -w 2 -c 1 --nproc 2
fi
for f in "$L"/*.log; do echo "=== $(basename "$f" .log)"; cat "$f"; done >"$OUT/all.log"
save
echo "== summary"; cat "$OUT/summary.txt"
