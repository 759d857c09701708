#!/usr/bin/env bash
# Call 7 of docs/bench/2026-11-28-h100x2 — on nvidia-h100-x4 (the bundle of `make gpu-bundle-four`
# plus UCX's libraries, at the session's last code commit): every collective, 64 B – 64 MB, across
# 2 emulated nodes × 2 H100s over sockets and over UCX, NCCL beside with NCCL_HOSTID per node
# (scripts/gpu-nodes.sh). $OUT/printed.txt is the console, $OUT/call7.tgz the logs.
set -u
tar -xzf .gpuz/bundle.tgz
OUT=$OUT/call7 NP=4 NODES=2 NETS="socket ucx" BUDGET=500 bash .gpu/gpu-nodes.sh 2>&1 | tail -n 95 >"$OUT/printed.txt"
tar -C "$OUT" -czf "$OUT/call7.tgz" call7
rm -rf "$OUT/call7"
