#!/usr/bin/env bash
# Call 2 (2026-11-27, eighteenth session, 2×H100): the acceptance's second part on the seventeenth
# session's final commit (f58ad19): weft bench with plots, the network as 2 emulated nodes over
# sockets and UCX, the copy-engine AllGather/AllReduce and the port latency, forced ring/tree, and
# the FSDP2 training step beside NCCL.
set -u
T0=$(date +%s)
tar -xzf .gpuz/bundle.tgz
export NCCL_NVLS_ENABLE=0; unset WEFT_NVLS
export WEFT_REQUIRE=nvlink
PARTS="bench net port algo fsdp" BUDGET=540 bash .gpu/gpu-accept.sh >"$OUT/accept.txt" 2>&1
echo "== accept rc=$? at $(( $(date +%s) - T0 )) s"
tail -n 60 "$OUT/summary.txt"
