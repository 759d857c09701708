#!/usr/bin/env bash
# Call 4 (2026-11-27, twentieth session, 2×H100 `nvidia-h100-x2`): the 2-GPU acceptance, first part,
# on the LL128 build (make gpu-bundle-accept here; carry .gpuz). ratios.txt: scripts/cbench-ratios.py
# over the cbench-nccl-*/cbench-weft-* pairs of logs.tar.gz.
tar -xzf .gpuz/bundle.tgz && PARTS="tests cbench host" BUDGET=500 bash .gpu/gpu-accept.sh
