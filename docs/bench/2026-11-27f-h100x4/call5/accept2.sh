#!/usr/bin/env bash
# Call 5 (2026-11-27, twentieth session, 2×H100 `nvidia-h100-x2`, the same warm machine as call 4): the
# 2-GPU acceptance, second part, on the LL128 build.
tar -xzf .gpuz/bundle.tgz && PARTS="bench net port algo fsdp" BUDGET=420 bash .gpu/gpu-accept.sh
