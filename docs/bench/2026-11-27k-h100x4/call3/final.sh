#!/usr/bin/env bash
# Call 3 (2026-11-27, 4×H100): this session's build (kernel parameters grew by the network windows'
# three words, so every kernel changed) on one node and across emulated nodes:
#   a: gpu-four.sh — every collective through the C ABI on 4 GPUs of one node beside NCCL, every
#      element checked (the regression check of the single-node paths);
#   b: AllReduce, AllGather, ReduceScatter across 2 emulated nodes × 2 GPUs over sockets with the
#      hierarchical plans at 4 blocks (call 2's choice), beside NCCL (NCCL_HOSTID per node);
#   c: AllGather and ReduceScatter across 2 emulated nodes × 1 GPU (issue 22's shape), 64 B – 16 KB;
#   d: FSDP2 across 2 emulated nodes × 2 GPUs, CUDA_DEVICE_MAX_CONNECTIONS=1, as call 1's a.
# Run from the repository root after `make gpu-bundle-four`.
set -u
tar -xzf .gpuz/bundle.tgz
export NCCL_NVLS_ENABLE=0
unset WEFT_NVLS WEFT_ENGINE_WAITS
T0=$SECONDS
BUDGET=260 OUT="$OUT/a" bash .gpu/gpu-four.sh >"$OUT/a.txt" 2>&1
echo "== a rc $? ($((SECONDS - T0)) s)"; tail -n 70 "$OUT/a.txt"
B=$PWD/.gpu
( export NCCL_NET=Socket NCCL_SOCKET_IFNAME=lo WEFT_SOCKET_IFNAME=lo WEFT_NET=socket
for c in all_reduce all_gather reduce_scatter; do
  left=$((470 - (SECONDS - T0)))
  [ "$left" -lt 25 ] && { echo "== b $c: skipped"; continue; }
  timeout $((left < 45 ? left : 45)) "$B/weft" run --nproc 4 --nodes 2 -- sh -c 'NCCL_HOSTID=emul$WEFT_NODE_ID exec "$0" "$@"' \
    "$B/weft" bench "$c" -b 64 -e 64M -f 16 -w 5 -n 40 --hal nvlink --baseline nccl -J "$OUT/b-$c.json" >"$OUT/b-$c.txt" 2>&1
  echo "== b $c rc $? ($((SECONDS - T0)) s)"
  grep -E '^ +[0-9]+ ' "$OUT/b-$c.txt" | tr -s ' ' | cut -d' ' -f2,7,10,11,15,18,21,22,23
  grep -E 'Out of bounds|rror' "$OUT/b-$c.txt" | head -3
done
for c in all_gather reduce_scatter; do
  left=$((500 - (SECONDS - T0)))
  [ "$left" -lt 20 ] && { echo "== c $c: skipped"; continue; }
  CUDA_VISIBLE_DEVICES=0,1 timeout $((left < 30 ? left : 30)) "$B/weft" run --nproc 2 --nodes 2 -- sh -c 'NCCL_HOSTID=emul$WEFT_NODE_ID exec "$0" "$@"' \
    "$B/weft" bench "$c" -b 64 -e 16K -f 16 -w 20 -n 200 --hal nvlink --baseline nccl -J "$OUT/c-$c.json" >"$OUT/c-$c.txt" 2>&1
  echo "== c $c rc $? ($((SECONDS - T0)) s)"
  grep -E '^ +[0-9]+ ' "$OUT/c-$c.txt" | tr -s ' ' | cut -d' ' -f2,7,10,11,15,18,21,22,23
done )
left=$((560 - (SECONDS - T0)))
if [ "$left" -gt 70 ]; then
  env FSDP_ARGS="--layers 4 --steps 10 --measure 5" STEP_LIMIT=$((left / 2)) OUT="$OUT/d" NP=4 STEPS="nccl weft-nodes2" BUDGET=$((left - 5)) bash .gpu/gpu-fsdp.sh >"$OUT/d.txt" 2>&1
  echo "== d rc $? ($((SECONDS - T0)) s)"; tail -n 6 "$OUT/d.txt"
else
  echo "== d: skipped, $left s left"
fi
