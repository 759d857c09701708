#!/usr/bin/env bash
# Call 5 (2026-11-27, 4×H100): the hierarchical plans in two shapes across 2 emulated nodes × 2 GPUs
# over sockets — up to 8 MiB per rank 4 blocks with windows of 2 MiB, above 32 × 1024 with windows of
# 8 MiB — after call 3's FSDP2 step took 486 ms with 4 blocks at every size against call 1's 325 with
# 32 (FSDP2's gathers are 134 MB per rank). a: AllReduce, AllGather, ReduceScatter 256 KB – 256 MB
# beside NCCL (NCCL_HOSTID per emulated node); b: FSDP2, CUDA_DEVICE_MAX_CONNECTIONS=1.
# Run from the repository root after `make gpu-bundle-four`.
set -u
tar -xzf .gpuz/bundle.tgz
export NCCL_NVLS_ENABLE=0
unset WEFT_NVLS WEFT_ENGINE_WAITS
T0=$SECONDS
B=$PWD/.gpu
( export NCCL_NET=Socket NCCL_SOCKET_IFNAME=lo WEFT_SOCKET_IFNAME=lo WEFT_NET=socket
for c in all_reduce all_gather reduce_scatter; do
  timeout 70 "$B/weft" run --nproc 4 --nodes 2 -- sh -c 'NCCL_HOSTID=emul$WEFT_NODE_ID exec "$0" "$@"' \
    "$B/weft" bench "$c" -b 256K -e 256M -f 4 -w 3 -n 10 --hal nvlink --baseline nccl -J "$OUT/a-$c.json" >"$OUT/a-$c.txt" 2>&1
  echo "== a $c rc $? ($((SECONDS - T0)) s)"
  grep -E '^ +[0-9]+ ' "$OUT/a-$c.txt" | tr -s ' ' | cut -d' ' -f2,7,10,11,15,18,21,22,23
  grep -E 'Out of bounds|rror' "$OUT/a-$c.txt" | head -3
done )
left=$((540 - (SECONDS - T0)))
env FSDP_ARGS="--layers 4 --steps 10 --measure 5" STEP_LIMIT=$((left / 2)) OUT="$OUT/b" NP=4 STEPS="nccl weft-nodes2" BUDGET=$((left - 5)) bash .gpu/gpu-fsdp.sh >"$OUT/b.txt" 2>&1
echo "== b rc $? ($((SECONDS - T0)) s)"; tail -n 6 "$OUT/b.txt"
