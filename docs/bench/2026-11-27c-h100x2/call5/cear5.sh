#!/usr/bin/env bash
# Call 5 (2026-11-27, seventeenth session, 2×H100): the copy-engine AllReduce through the NCCL ABI
# with the outputs exported at the call (cear.go, launchCEAllReduceExported): GPU tests; its bound
# (WEFT_CE_ALLREDUCE_MIN_BYTES 64M against the default 1G) at 64 MB - 1 GB, float and bfloat16;
# eager mode (-G 0 -H 1) at 256 MB - 1 GB; every large collective at 256 MB - 1 GB with the
# defaults after the exchange's refactor; NCCL beside in the same call.
set -u
T0=$(date +%s)
tar -xzf .gpuz/bundle.tgz
export NCCL_NVLS_ENABLE=0; unset WEFT_NVLS
B=.gpu; CB=examples/cbench/cbench
W=(env LD_PRELOAD=$PWD/$B/libweft_nccl.so WEFT_NCCL_FALLBACK=0 WEFT_DEBUG=WARN)
R=(env -u LD_PRELOAD NCCL_DEBUG=WARN)
mkdir -p "$OUT/logs"
el() { echo "== $(( $(date +%s) - T0 )) s: $*"; }
{
make -B -C examples/cbench CFLAGS='-O2 -Wall' >/dev/null 2>&1 || make -B -C examples/cbench CFLAGS='-O2 -Wall' OMP= >/dev/null
el tests; if [ -z "${SKIPTESTS:-}" ]; then
WEFT_REQUIRE=nvlink timeout 240 $B/weft.test -test.count=1 -test.v -test.run '^(TestCEAllReduceExportedNVLink|TestCEAllReduceNVLink|TestCEP2PNVLink|TestCEP2PGraphReplayNVLink)$' >"$OUT/tests.log" 2>&1; echo rc=$?
grep -E "^(--- |ok|FAIL|PASS)|    --- |wrong|want" "$OUT/tests.log" | head -20; fi
for d in float bfloat16; do
  el "all_reduce $d"
  A=(-g 2 -t allreduce -d $d -b 64M -e 1G -f 2 -w 5 -n 20 -G 10 -c 1 -p 0)
  timeout 60 "${R[@]}" $CB "${A[@]}" >"$OUT/logs/ar-nccl-$d.log" 2>&1; echo rc=$?
  timeout 60 "${W[@]}" WEFT_CE_ALLREDUCE_MIN_BYTES=0 $CB "${A[@]}" >"$OUT/logs/ar-sm-$d.log" 2>&1; echo rc=$?
  timeout 60 "${W[@]}" WEFT_CE_ALLREDUCE_MIN_BYTES=64M $CB "${A[@]}" >"$OUT/logs/ar-ce64M-$d.log" 2>&1; echo rc=$?
  timeout 60 "${W[@]}" $CB "${A[@]}" >"$OUT/logs/ar-default-$d.log" 2>&1; echo rc=$?
  timeout 60 "${W[@]}" WEFT_CE_ALLREDUCE_MIN_BYTES=64M $CB "${A[@]}" >"$OUT/logs/ar-ce64M2-$d.log" 2>&1; echo rc=$?
  timeout 60 "${W[@]}" WEFT_CE_ALLREDUCE_MIN_BYTES=0 $CB "${A[@]}" >"$OUT/logs/ar-sm2-$d.log" 2>&1; echo rc=$?
  python3 scripts/cbench-ratios.py "$OUT/logs/ar-nccl-$d.log" "$OUT"/logs/ar-{sm,ce64M,default,ce64M2,sm2}-$d.log
done
el eager
E=(-g 2 -t allreduce -d float -b 256M -e 1G -f 4 -w 5 -n 20 -G 0 -c 1 -p 0 -H 1)
timeout 60 "${R[@]}" $CB "${E[@]}" >"$OUT/logs/eager-nccl.log" 2>&1; echo rc=$?
timeout 60 "${W[@]}" WEFT_CE_ALLREDUCE_MIN_BYTES=256M $CB "${E[@]}" >"$OUT/logs/eager-weft.log" 2>&1; echo rc=$?
python3 scripts/cbench-ratios.py "$OUT/logs/eager-nccl.log" "$OUT/logs/eager-weft.log"
for f in eager-nccl eager-weft; do echo "-- $f (size, time us, host us per enqueue)"; grep -E "^ +[0-9]" "$OUT/logs/$f.log" | tr -s " " | cut -d" " -f2,7,15; done
el "every collective, defaults"
A=(-g 2 -t sendrecv,gather,scatter,broadcast,alltoall,reduce,allgather,reducescatter -d float -b 256M -e 1G -f 2 -w 5 -n 20 -G 10 -c 1 -p 0)
timeout 120 "${R[@]}" $CB "${A[@]}" >"$OUT/logs/all-nccl.log" 2>&1; echo rc=$?
timeout 120 "${W[@]}" $CB "${A[@]}" >"$OUT/logs/all-weft.log" 2>&1; echo rc=$?
python3 scripts/cbench-ratios.py "$OUT/logs/all-nccl.log" "$OUT/logs/all-weft.log"
grep -h "wrong elements" "$OUT"/logs/*.log | sort | uniq -c
el done
} >"$OUT/cear5.txt" 2>&1
tar -czf "$OUT/logs.tar.gz" -C "$OUT" logs && rm -rf "$OUT/logs"
cat "$OUT/cear5.txt"
