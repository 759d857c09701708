#!/usr/bin/env bash
# Call 1 of docs/bench/2026-11-28-h100x2 (one device call on nvidia-h100-x2, run from the
# repository root after `make gpu-bundle-accept`): paired socket connections (hal/socket/link.go).
#  1. A/B alternated twice at 64 B – 16 KB between 2 emulated nodes over sockets:
#     WEFT_SOCKET_PAIR=0 (a connection per engine, the parent's shape) against 1 (the default).
#  2. Issue 22's run on this build: every collective, 64 B – 64 MB, over sockets and UCX, NCCL's
#     socket transport beside it (scripts/gpu-nodes.sh).
#  3. weft bench all_reduce 128 KB – 2 MB on the 2 GPUs (Comm.AllReduce takes Launch's LL up to
#     1 MiB since bb6acdc, not yet measured on GPUs), beside NCCL.
# Everything comes back in $OUT/call1.tgz; $OUT/printed.txt is the console.
set -u
tar -xzf .gpuz/bundle.tgz
R=$OUT/call1
mkdir -p "$R"
{
for i in 1 2; do
  for p in 0 1; do
    echo "=== A/B pass $i WEFT_SOCKET_PAIR=$p"
    OUT=$R/ab-pair$p-$i WEFT_SOCKET_PAIR=$p NETS=socket COLLS="all_gather reduce_scatter all_reduce" \
      MAXB=16K SMALLN=300 BUDGET=60 bash .gpu/gpu-nodes.sh | tail -n 12
  done
done
echo "=== issue 22 on this build"
OUT=$R/full NETS="socket ucx" BUDGET=300 bash .gpu/gpu-nodes.sh | tail -n 60
echo "=== weft bench all_reduce on 2 GPUs"
NCCL_NVLS_ENABLE=0 timeout 60 .gpu/weft bench all_reduce -b 128K -e 2M -f 2 -G 20 -c 1 --baseline nccl --nproc 2 \
  -J "$R/bench-all_reduce.json" >"$R/bench-all_reduce.log" 2>&1
tail -n 20 "$R/bench-all_reduce.log"
} 2>&1 | tee "$OUT/printed.txt"
tar -C "$OUT" -czf "$OUT/call1.tgz" call1
rm -rf "$R"
