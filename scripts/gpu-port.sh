#!/usr/bin/env bash
# Issue 8 (PortChannel, copy engines, hal/pcie) on a 2-GPU host in one device call. Run from the
# repository root after `make gpu-bundle-port` here. Steps are time-boxed; the whole run stays under
# BUDGET seconds (default 540). Files back in $OUT: summary.txt, logs.tar.gz, bench.log,
# conformance-*.md/json.
#
# Knobs: STEPS="tests conf-nvlink conf-pcie lat bench-ce bench-pcie moe"  BUDGET=540
#        CE_MIN=256M CE_MAX=1G  PCIE_MAX=256M
set -u
# shellcheck source=scripts/steps.sh
source "$(dirname "$0")/steps.sh"
BUDGET=${BUDGET:-540}
STEPS=${STEPS:-"tests conf-nvlink conf-pcie lat bench-ce bench-pcie moe"}

# steps.sh keeps NVLink multicast off (NCCL_NVLS_ENABLE=0, WEFT_NVLS unset).
export WEFT_REQUIRE=${WEFT_REQUIRE:-nvlink}
CE_MIN=${CE_MIN:-256M}
CE_MAX=${CE_MAX:-1G}
PCIE_MAX=${PCIE_MAX:-256M}
{ date -u; hostname; nvidia-smi -L; nvidia-smi topo -m; ls -la "$B"; } >"$L/machine.txt" 2>&1
cat "$L/machine.txt"
pass() { grep -E "^(ok|PASS|FAIL|--- FAIL)" $log | tail -n 3; }

# ---- 1. GPU tests: the copy-engine engine, hal/pcie, port-channel collectives on nvlink, and
# the memory-channel collectives again (the CUDA core moved to internal/cudadev).
if want tests; then
  step test-cudadev 120 'pass' -- "$B/internal_cudadev.test" -test.count=1 -test.v
  step test-nvlink 90 'pass' -- "$B/hal_nvlink.test" -test.count=1 -test.v
  [ -x "$B/hal_pcie.test" ] && step test-pcie 90 'pass' -- env WEFT_REQUIRE=pcie "$B/hal_pcie.test" -test.count=1 -test.v
  step test-port-colls 150 'pass' -- "$B/weft.test" -test.count=1 -test.v -test.run 'TestCollectivesPortNVLink|TestCollectivesNVLink$'
fi

# ---- 2. conformance: port-mapped (and the rest) on nvlink; hal/pcie host-staged (P2P off)
if want conf-nvlink; then
  step conf-nvlink 120 'grep -E "pass|fail" $log | tail -n 2' -- "$B/weft" conformance --hal nvlink --json "$OUT/conformance-nvlink.json" --md "$OUT/conformance-nvlink.md"
fi
if want conf-pcie; then
  step conf-pcie 120 'grep -E "pass|fail" $log | tail -n 2' -- env WEFT_PCIE_P2P=0 WEFT_REQUIRE=pcie "$B/weft" conformance --hal pcie --json "$OUT/conformance-pcie.json" --md "$OUT/conformance-pcie.md"
fi

# ---- 3. put-with-signal latency (kernel push -> remote wait), port and memory channels, and
# NCCL's 8-byte sendrecv beside it in the same run
if want lat; then
  step lat-weft 90 'grep us/one $log' -- env WEFT_BENCH_HAL=nvlink "$B/weft.test" -test.run '^$' -test.bench PortLatency -test.benchtime 3x
  step lat-nccl 60 'grep -E "^ +8 " $log' -- "$B/weft" bench sendrecv -b 8 -e 8 -n 200 -w 20 --baseline nccl --nproc 2
fi

# ---- 4. AllGather / AllToAll / AllReduce over copy engines beside NCCL (sm=B/D: blocks / moving data)
if want bench-ce; then
  for c in all_gather alltoall; do
    step "ce-$c" 60 'grep -E "^ +[0-9]+ " $log | tail -n 3' -- env WEFT_ALGO=port "$B/weft" bench $c -b "$CE_MIN" -e "$CE_MAX" -f 2 -n 20 -w 5 --baseline nccl --nproc 2
    step "sm-$c" 45 'grep -E "^ +[0-9]+ " $log | tail -n 3' -- "$B/weft" bench $c -b "$CE_MIN" -e "$CE_MAX" -f 2 -n 20 -w 5 --baseline nccl --nproc 2
  done
  step ce-all_reduce 60 'grep -E "^ +[0-9]+ " $log | tail -n 3' -- env WEFT_ALGO=port "$B/weft" bench all_reduce --raw -b 1M -e "$CE_MAX" -f 4 -n 20 -w 5 --baseline nccl --nproc 2
fi

# ---- 5. hal/pcie host-staged (WEFT_PCIE_P2P=0) beside NCCL on its SHM path (NCCL_P2P_DISABLE=1)
if want bench-pcie; then
  for c in all_reduce all_gather; do
    # WEFT_ENGINE_WAITS=1: port-mapped-only GPU communicators are refused by default (their kernels
    # wait on the engines' stream operations; weft bench queues nothing behind its calls).
    step "pcie-$c" 60 'grep -E "^ +[0-9]+ " $log | tail -n 3' -- env WEFT_HAL=pcie WEFT_PCIE_P2P=0 NCCL_P2P_DISABLE=1 WEFT_REQUIRE=pcie WEFT_ENGINE_WAITS=1 \
      "$B/weft" bench $c --raw -b 1M -e "$PCIE_MAX" -f 4 -n 10 -w 3 --baseline nccl --nproc 2
  done
fi

# ---- 6. MoE dispatch/combine beside NCCL grouped send/recv
if want moe && [ -x "$B/moe" ]; then
  step moe 120 'tail -n 6 $log' -- "$B/moe" -n 2 -tokens 4096 -hidden 7168 -topk 8 -experts 64
  step moe-port 120 'tail -n 6 $log' -- "$B/moe" -n 2 -tokens 4096 -hidden 7168 -topk 8 -experts 64 -port
fi

for f in "$L"/ce-*.log "$L"/sm-*.log "$L"/pcie-*.log "$L"/lat-*.log "$L"/moe*.log; do
  [ -f "$f" ] && { echo "=== $(basename "$f" .log)"; cat "$f"; }
done >"$OUT/bench.log"
save
echo "== summary"; cat "$OUT/summary.txt"
exit $nbad
