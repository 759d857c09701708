#!/usr/bin/env bash
# Call 11 (2026-11-28, 2×H100): the copy-engine AllReduce through Comm.AllReduce, whose outputs
# are registered, so the reduced windows go straight into the peers' outputs (no AG landing, no
# copy-out). TestCEAllReduceNVLink (Comm.AllReduce in and out of place inside it), then
# weft bench all_reduce 64 MB – 1 GB (checked) beside NCCL: WEFT_ALGO=ce and the default (SM 2PA).
set -u
tar -xzf .gpuz/bundle.tgz
export NCCL_NVLS_ENABLE=0; unset WEFT_NVLS
export WEFT_REQUIRE=nvlink
{
timeout 60 .gpu/weft.test -test.run 'TestCEAllReduceNVLink' -test.v 2>&1 | grep -E "^(---|ok|FAIL|PASS)|wrong|rror" | head
for d in bfloat16 float; do
  echo "== ce $d"; WEFT_ALGO=ce timeout 45 .gpu/weft bench all_reduce -b 64M -e 1G -f 4 -n 10 -w 3 -c 1 -d $d --baseline nccl --nproc 2 2>&1 | grep -E "^ +[0-9]|rror"
  echo "== default $d"; timeout 45 .gpu/weft bench all_reduce -b 64M -e 1G -f 4 -n 10 -w 3 -c 1 -d $d --baseline nccl --nproc 2 2>&1 | grep -E "^ +[0-9]|rror"
done
} >"$OUT/zc.txt" 2>&1
cat "$OUT/zc.txt"
