#!/usr/bin/env bash
# The second acceptance call of issues 19-22 (after scripts/gpu-accept.sh): the root package's
# GPU tests by name (the first call's pattern ran too many for its limit), the LL point-to-point
# bound at 128 KiB (default) against 512 KiB (WEFT_P2P_LL_MAX_BYTES) beside NCCL through the C
# ABI, and the 2-node network over sockets and UCX after the network backends' shared core
# (hal/netcore). Run from the repository root after `make gpu-bundle-accept`; BUDGET (240) bounds it.
# Files back in $OUT: summary.txt, logs.tar.gz.
set -u
# shellcheck source=scripts/steps.sh
source "$(dirname "$0")/steps.sh"
BUDGET=${BUDGET:-240}
STEPS=${STEPS:-"tests p2p net"}
LIB=$B/libweft_nccl.so
export WEFT_REQUIRE=${WEFT_REQUIRE:-nvlink}
CB=examples/cbench/cbench
{ date -u; hostname; nvidia-smi -L; ls -la "$B"; } >"$L/machine.txt" 2>&1
wrong() { grep -E "wrong elements in all" $log | tail -n 1; }
pass() { grep -E "^(ok|PASS|FAIL|--- FAIL)" $log | tail -n 3; }
if want tests; then
  step test-root 100 'grep -E "^(--- |ok|PASS|FAIL)" $log | tr "\n" " " | cut -c1-300' -- "$B/weft.test" -test.count=1 -test.v \
    -test.run 'TestP2PNVLink|TestP2PRegisteredNVLink|TestP2PRegisteredGraphNVLink|TestInPlaceAllToAllNVLink|TestAllReduceNVLink'
fi
if want p2p; then
  step cbench-build 60 'ls -la $CB | cut -c1-80' -- bash -c "make -C examples/cbench CFLAGS='-O2 -Wall' >/dev/null || \
    gcc -O2 -I/usr/local/cuda/include -o $CB $CB.c -L/usr/local/cuda/lib64 -Wl,-rpath,/usr/local/cuda/lib64 -l:libnccl.so.2 -lcudart -ldl -lm"
  CBA=(-g 2 -t sendrecv,gather,scatter -b 32K -e 4M -f 2 -w 5 -n 20 -G 10 -c 1 -p 0)
  step p2p-nccl 30 'wrong' -- env -u LD_PRELOAD NCCL_DEBUG=WARN $CB "${CBA[@]}"
  step p2p-weft-128K 30 'wrong' -- env LD_PRELOAD="$LIB" WEFT_NCCL_FALLBACK=0 $CB "${CBA[@]}"
  step p2p-weft-512K 30 'wrong' -- env LD_PRELOAD="$LIB" WEFT_NCCL_FALLBACK=0 WEFT_P2P_LL_MAX_BYTES=512K $CB "${CBA[@]}"
  step p2p-weft-1M 30 'wrong' -- env LD_PRELOAD="$LIB" WEFT_NCCL_FALLBACK=0 WEFT_P2P_LL_MAX_BYTES=1M $CB "${CBA[@]}"
fi
if want net; then
  if ! ldconfig -p | grep -q 'libucp.so.0 ' && [ -d "$B/ucx" ]; then
    export LD_LIBRARY_PATH="$B/ucx${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" UCX_MODULE_DIR="$B/ucx/ucx"
  fi
  for net in socket ucx; do
    step "net-$net" 60 'tail -n 5 $log | tr -s " " | cut -c1-200' -- env OUT="$WORK/net-$net" BUDGET=55 NETS=$net \
      COLLS="all_reduce all_gather reduce_scatter alltoall" MAXB=16M bash "$ROOT/scripts/gpu-net.sh"
    cp "$WORK/net-$net"/*.json "$L/" 2>/dev/null
  done
fi
save
{
  echo "== gpu-accept2: $(( $(date +%s) - T0 ))s"
  printf '%s\n' "${rows[@]}"
  echo "== $nbad step(s) failed, timed out or skipped"
  for f in "$WORK"/net-*/summary.txt; do [ -f "$f" ] && { echo "== $f"; cat "$f"; }; done
} | tee "$OUT/summary.txt"
[ "$nbad" -eq 0 ]
