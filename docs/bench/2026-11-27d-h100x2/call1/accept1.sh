#!/usr/bin/env bash
# Call 1 (2026-11-27, eighteenth session, 2×H100): the acceptance's first part on the seventeenth
# session's final commit (f58ad19; its pinned graph mappings, cudadev.Capturing, the AllToAll half
# bound, exported_calls and the Reduce graph replay never ran on GPUs), then the stream-ops
# conformance case on hal/nvlink and AllToAll at 8-64 MB beside NCCL (segments on copy engines
# from 16 MiB by default now).
set -u
T0=$(date +%s)
tar -xzf .gpuz/bundle.tgz
export NCCL_NVLS_ENABLE=0; unset WEFT_NVLS
export WEFT_REQUIRE=nvlink
PARTS="tests cbench host" BUDGET=470 OUT="$OUT/accept" bash .gpu/gpu-accept.sh >"$OUT/accept.txt" 2>&1
echo "== accept rc=$? at $(( $(date +%s) - T0 )) s"
{
timeout 60 .gpu/weft conformance --hal nvlink --run memory-mapped/stream 2>&1 | tail -n 15; echo "conformance rc=$?"
B=.gpu; CB=examples/cbench/cbench
W=(env LD_PRELOAD=$PWD/$B/libweft_nccl.so WEFT_NCCL_FALLBACK=0 WEFT_DEBUG=WARN)
R=(env -u LD_PRELOAD NCCL_DEBUG=WARN)
A=(-g 2 -t alltoall -d float -b 8M -e 64M -f 2 -w 5 -n 20 -G 10 -c 1 -p 0)
mkdir -p "$OUT/a2a"
timeout 40 "${R[@]}" $CB "${A[@]}" >"$OUT/a2a/nccl.log" 2>&1; echo rc=$?
timeout 40 "${W[@]}" $CB "${A[@]}" >"$OUT/a2a/weft.log" 2>&1; echo rc=$?
timeout 40 "${W[@]}" WEFT_CE_P2P_MIN_BYTES=64M $CB "${A[@]}" >"$OUT/a2a/weft-64m.log" 2>&1; echo rc=$?
python3 scripts/cbench-ratios.py "$OUT/a2a/nccl.log" "$OUT/a2a/weft.log" "$OUT/a2a/weft-64m.log"
grep -h "wrong elements" "$OUT"/a2a/*.log | sort | uniq -c
} >"$OUT/extra.txt" 2>&1
cd "$OUT" && tar -czf a2a.tgz a2a && rm -rf a2a
echo "== done at $(( $(date +%s) - T0 )) s"
tail -n 40 "$OUT/accept/summary.txt"; cat "$OUT/extra.txt"
