#!/usr/bin/env bash
# Call 6 of docs/bench/2026-11-28-h100x2 (nvidia-h100-x2, the bundle of `make gpu-bundle-accept` at
# the session's last code commit): issue 22's run again — every collective, 64 B – 64 MB, across
# 2 emulated nodes over sockets and over UCX, NCCL's socket transport beside
# (scripts/gpu-nodes.sh). $OUT/printed.txt is the console, $OUT/call6.tgz the logs.
set -u
tar -xzf .gpuz/bundle.tgz
OUT=$OUT/call6 NETS="socket ucx" BUDGET=400 bash .gpu/gpu-nodes.sh 2>&1 | tail -n 90 >"$OUT/printed.txt"
tar -C "$OUT" -czf "$OUT/call6.tgz" call6
rm -rf "$OUT/call6"
