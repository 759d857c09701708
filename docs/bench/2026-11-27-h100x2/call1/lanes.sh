#!/usr/bin/env bash
# Call 1 (2026-11-27, 2×H100): hal/ucx lanes. (1) BenchmarkUCXPut, one 16 MiB put and its signal
# between two NetDevices of one process on the GPU host's CPU, over 1, 2 and 4 lanes; (2) two
# emulated nodes over UCX, 7 collectives at 1–64 MB, WEFT_UCX_LANES=1 then 2 (then 4 for two
# of them), beside NCCL's sockets in the same processes; (3) 64 B–256 KB over sockets and UCX
# with 20 warm-up and 200 timed iterations (scripts/gpu-net.sh SMALLN). From the repository
# root, carrying .gpuz (make gpu-bundle-accept; hal/ucx's test binary as .gpuz/ucx.test.gz).
set -u
tar -xzf .gpuz/bundle.tgz
B=$PWD/.gpu
W=$(mktemp -d /tmp/lanes.XXXXXX)
if ! ldconfig -p | grep -q 'libucp.so.0 '; then
  export LD_LIBRARY_PATH="$B/ucx" UCX_MODULE_DIR="$B/ucx/ucx"
fi
gunzip -c .gpuz/ucx.test.gz >"$W/ucx.test" && chmod +x "$W/ucx.test"
(cd hal/ucx && timeout 90 "$W/ucx.test" -test.run XXX -test.bench 'BenchmarkUCXPut/tcp/staging0' -test.benchtime 30x) >"$OUT/put.txt" 2>&1
ALL="all_reduce all_gather reduce_scatter alltoall broadcast reduce sendrecv"
for lanes in 1 2; do
  WEFT_UCX_LANES=$lanes OUT="$W/l$lanes" BUDGET=110 NETS=ucx COLLS="$ALL" MAXB=64M FACTOR=4 SPLIT=1M SMALLN=0 \
    bash scripts/gpu-net.sh >"$W/l$lanes.log" 2>&1
done
WEFT_UCX_LANES=4 OUT="$W/l4" BUDGET=40 NETS=ucx COLLS="broadcast all_gather" MAXB=64M FACTOR=4 SPLIT=1M SMALLN=0 \
  bash scripts/gpu-net.sh >"$W/l4.log" 2>&1
for net in socket ucx; do
  OUT="$W/s-$net" BUDGET=100 NETS=$net COLLS="$ALL" MAXB=256K FACTOR=16 SMALLN=200 bash scripts/gpu-net.sh >"$W/s-$net.log" 2>&1
done
for d in l1 l2 l4 s-socket s-ucx; do
  echo "== $d"; cat "$W/$d/summary.txt"; python3 scripts/net-sum.py "$W/$d"
done >"$OUT/sum.txt" 2>&1
tar -C "$W" -czf "$OUT/all.tgz" --exclude='*.test' .
cat "$OUT/put.txt" "$OUT/sum.txt"
