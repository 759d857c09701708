#!/usr/bin/env bash
# Call 4 of docs/bench/2026-11-28-h100x2 — on nvidia-h100-x4 (2 emulated nodes × 2 H100s; the
# bundle of `make gpu-bundle-four` plus UCX's libraries, .gpu/weft at the commit "algorithms:
# hierarchical Broadcast across nodes", .gpu/weft-flat built from its parent):
#  1. Broadcast 64 B – 64 MB over sockets, alternated twice: "flat" (the parent: the flat port
#     plan, the root's window on the network once per other rank) against "hier" (Broadcast2PH),
#     NCCL beside with NCCL_HOSTID per node.
#  2. The hierarchical build over UCX once.
# Everything comes back in $OUT/call4.tgz; $OUT/printed.txt is the console.
set -u
tar -xzf .gpuz/bundle.tgz
R=$OUT/call4
mkdir -p "$R"
for v in flat hier; do
  mkdir -p "/tmp/$v" && cp -r .gpu "/tmp/$v/.gpu" && ln -sfn "$PWD/scripts" "/tmp/$v/scripts"
done
mv /tmp/flat/.gpu/weft-flat /tmp/flat/.gpu/weft
{
nvidia-smi -L
for i in 1 2; do
  for v in flat hier; do
    echo "=== pass $i socket-$v"
    (cd "/tmp/$v" && OUT=$R/socket-$v-$i NP=4 NODES=2 NETS=socket COLLS="broadcast" BUDGET=60 bash .gpu/gpu-nodes.sh | grep -E "ratio|FAIL|TIMEOUT")
  done
done
echo "=== ucx-hier"
(cd /tmp/hier && OUT=$R/ucx-hier NP=4 NODES=2 NETS=ucx COLLS="broadcast" BUDGET=60 bash .gpu/gpu-nodes.sh | grep -E "ratio|FAIL|TIMEOUT")
} 2>&1 | tee "$OUT/printed.txt"
tar -C "$OUT" -czf "$OUT/call4.tgz" call4
rm -rf "$R"
