#!/usr/bin/env bash
# Issue 10 on one GPU of an H100/H200 host, in one device call: NVRTC compiles the NVLS kernels and
# the multimem primitives of hal/nvswitch (no multicast object is created: WEFT_NVLS stays unset),
# `weft conformance` reports hal/nvswitch and hal/xgmi NotSupported with their reasons, and the
# CUDA backends are checked again after the kernel parameter block grew (switch bindings).
# Run from the repository root after `make gpu-bundle-switch` here. Files back in $OUT:
# summary.txt, logs.tar.gz, conformance-*.md.
#
# Knobs: STEPS="nvrtc conf-nvswitch conf-xgmi regress"  BUDGET=420
set -u
# shellcheck source=scripts/steps.sh
source "$(dirname "$0")/steps.sh"
BUDGET=${BUDGET:-420}
STEPS=${STEPS:-"nvrtc conf-nvswitch conf-xgmi regress"}

# steps.sh keeps NVLink multicast off (NCCL_NVLS_ENABLE=0, WEFT_NVLS unset).
{ date -u; hostname; nvidia-smi -L; nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1; ls -la "$B"; } >"$L/machine.txt" 2>&1
cat "$L/machine.txt"
pass() { grep -E "^(ok|PASS|FAIL|--- FAIL)" $log | tail -n 3; }

if want nvrtc; then
  step nvrtc-nvls 180 'grep -cE "compiled|PASS" $log; pass' -- env WEFT_REQUIRE=nvswitch-compile "$B/hal_nvswitch.test" -test.v -test.count=1 \
    -test.run 'TestSwitchCompileNVRTC|TestSwitchHeader|TestSwitchCodes|TestProbe|TestConformance'
fi
if want conf-nvswitch; then
  step conf-nvswitch 60 'grep -iE "not supported|N/S" $log | head -n 2' -- "$B/weft" conformance --hal nvswitch --md "$OUT/conformance-nvswitch.md"
fi
if want conf-xgmi; then
  step conf-xgmi 60 'grep -iE "not supported|N/S|rocm" $log | head -n 2' -- "$B/weft" conformance --hal xgmi --md "$OUT/conformance-xgmi.md"
fi
if want regress; then
  step test-cudadev 120 'pass' -- env WEFT_REQUIRE=nvlink "$B/internal_cudadev.test" -test.count=1 -test.v
  step test-nvlink 90 'pass' -- env WEFT_REQUIRE=nvlink "$B/hal_nvlink.test" -test.count=1 -test.v
  step conf-nvlink 150 'grep -E "pass|fail" $log | tail -n 2' -- env WEFT_REQUIRE=nvlink "$B/weft" conformance --hal nvlink --ranks 2 --quick --md "$OUT/conformance-nvlink-2ranks.md"
fi
save
echo "== summary =="
cat "$OUT/summary.txt"
exit "$nbad"
