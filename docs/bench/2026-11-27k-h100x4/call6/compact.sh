#!/usr/bin/env bash
# Call 6 (2026-11-27, 4×H100): the network windows compacted to the network slots (plan.NetScratchBytes:
# every part's slots from NetSlot on, at the scratch's stride, instead of a mirror of the whole scratch),
# the kernels addressing them with wslot_at's part argument; otherwise as call 5: across 2 emulated
# nodes × 2 GPUs over sockets, a: AllReduce, AllGather, ReduceScatter beside NCCL (NCCL_HOSTID per
# emulated node), 256 KB – 64 MB (both shapes); b: FSDP2, CUDA_DEVICE_MAX_CONNECTIONS=1.
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
    "$B/weft" bench "$c" -b 256K -e 64M -f 4 -w 3 -n 10 --hal nvlink --baseline nccl -J "$OUT/a-$c.json" >"$OUT/a-$c.txt" 2>&1
  echo "== a $c rc $? ($((SECONDS - T0)) s)"
  grep -E '^ +[0-9]+ ' "$OUT/a-$c.txt" | tr -s ' ' | cut -d' ' -f2,7,10,11,15,18,21,22,23
  grep -E 'Out of bounds|rror' "$OUT/a-$c.txt" | head -3
done )
left=$((540 - (SECONDS - T0)))
env FSDP_ARGS="--layers 4 --steps 10 --measure 5" STEP_LIMIT=$((left / 2)) OUT="$OUT/b" NP=4 STEPS="nccl weft-nodes2" BUDGET=$((left - 5)) bash .gpu/gpu-fsdp.sh >"$OUT/b.txt" 2>&1
echo "== b rc $? ($((SECONDS - T0)) s)"; tail -n 6 "$OUT/b.txt"
