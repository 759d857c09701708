#!/usr/bin/env bash
# Call 1 (2026-11-27, 4×H100): the network path's stream hazard fixed instead of refused
# (docs/network.md, "Streams and the network path"): the hierarchical plans keep the windows and
# semaphores their counterparts write in host memory (plan.Plan.NetSlot) and the flat port plans
# carry every channel over the network (plan.Channel.Net), so no CUDA stream operation sits
# between the wire and a waiting kernel. No WEFT_ENGINE_WAITS anywhere.
#   a: FSDP2 (fsdp_step.py, 4 layers) across 2 emulated nodes × 2 GPUs over sockets,
#      CUDA_DEVICE_MAX_CONNECTIONS=1 — served by weft (the build before timed out, then refused);
#   b: the same with the driver's default CUDA_DEVICE_MAX_CONNECTIONS;
#   c: weft bench, every collective, 2 emulated nodes × 2 GPUs over sockets, 64 B – 64 MB, beside
#      NCCL in the same processes with NCCL_HOSTID per emulated node (NVLink inside a node, its
#      socket transport between nodes: NCCL_NET=Socket over lo).
# Run from the repository root after `make gpu-bundle-four`.
set -u
tar -xzf .gpuz/bundle.tgz
export NCCL_NVLS_ENABLE=0
unset WEFT_NVLS WEFT_ENGINE_WAITS
nvidia-smi -L
A=(FSDP_ARGS="--layers 4 --steps 10 --measure 5" STEP_LIMIT=120)
served() {
  mkdir -p "/tmp/h$1" && tar -xzf "$OUT/$1/logs.tar.gz" -C "/tmp/h$1" 2>/dev/null
  echo "== $1: weft's init, forwarding and failures"
  grep -h -o -E 'msg="weft: communicator (ready|init failed)"|served_by=[^ ]*( \(weft cannot[^)]*\))?|timed out[^"]{0,160}|"weft: (first|communicator destroyed)[^"]*"' /tmp/h$1/logs/fsdp-weft-nodes2.log 2>/dev/null | sort | uniq -c | head -12
}
T0=$SECONDS
env "${A[@]}" OUT="$OUT/a" NP=4 STEPS="nccl weft-nodes2" BUDGET=140 bash .gpu/gpu-fsdp.sh >"$OUT/a.txt" 2>&1
echo "== a rc $? ($((SECONDS - T0)) s)"; tail -n 8 "$OUT/a.txt"; served a
env "${A[@]}" OUT="$OUT/b" NP=4 STEPS="nccl weft-nodes2" NODES_CDMC= BUDGET=120 bash .gpu/gpu-fsdp.sh >"$OUT/b.txt" 2>&1
echo "== b rc $? ($((SECONDS - T0)) s)"; tail -n 8 "$OUT/b.txt"; served b
B=$PWD/.gpu
export NCCL_NET=Socket NCCL_SOCKET_IFNAME=lo WEFT_SOCKET_IFNAME=lo WEFT_NET=socket
for c in all_reduce all_gather reduce_scatter broadcast reduce alltoall sendrecv; do
  left=$((560 - (SECONDS - T0)))
  [ "$left" -lt 30 ] && { echo "== c $c: skipped, $left s left"; continue; }
  lim=$((left < 55 ? left : 55))
  timeout "$lim" "$B/weft" run --nproc 4 --nodes 2 -- sh -c 'NCCL_HOSTID=emul$WEFT_NODE_ID exec "$0" "$@"' \
    "$B/weft" bench "$c" -b 64 -e 64M -f 16 -w 5 -n 40 --hal nvlink --baseline nccl -J "$OUT/c-$c.json" >"$OUT/c-$c.txt" 2>&1
  echo "== c $c rc $? ($((SECONDS - T0)) s)"
  grep -E '^ +[0-9]+ ' "$OUT/c-$c.txt" | tr -s ' ' | cut -c1-150
  grep -E 'Out of bounds|rror' "$OUT/c-$c.txt" | head -3
done
