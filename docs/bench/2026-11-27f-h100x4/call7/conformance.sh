#!/usr/bin/env bash
# Call 7 (2026-11-27, twentieth session, 4×H100 `nvidia-h100-x4`): weft conformance on hal/nvlink,
# 4 ranks, the device and memory-mapped sections (memory-mapped/ll128 new this session), report in
# docs/conformance/nvlink-h100x4.md. make gpu-bundle-four here; carry .gpuz.
set -u
tar -xzf .gpuz/bundle.tgz
export NCCL_NVLS_ENABLE=0; unset WEFT_NVLS
export WEFT_REQUIRE=nvlink
timeout 170 .gpu/weft conformance --hal nvlink --ranks 4 --run device,memory-mapped --md "$OUT/nvlink-h100x4.md" --json "$OUT/nvlink-h100x4.json"
echo "rc=$?"
