#!/usr/bin/env bash
# The network path's stream hazard (docs/network.md, "Streams and the network path") under a real
# client: PyTorch's every collective (examples/torch/dropin_check.py, eager) through
# libweft_nccl.so, 4 ranks on 4 GPUs as 2 emulated nodes x 2 ranks (WEFT_NODE_ID), over sockets,
# with CUDA_DEVICE_MAX_CONNECTIONS=1 (one hardware queue: Megatron-LM's setting) and with the
# default 8; control: 2 ranks as 2 emulated nodes x 1 (host windows). Each run has a hard limit.
set -u
tar -xzf .gpuz/bundle.tgz
export NCCL_NVLS_ENABLE=0 WEFT_NCCL_FALLBACK=0 WEFT_DEBUG=WARN WEFT_NET=socket WEFT_TIMEOUT=15s
unset WEFT_NVLS
IF=$(ip -o -4 addr show up 2>/dev/null | awk '$2 != "lo" {print $2; exit}')
export WEFT_SOCKET_IFNAME=${IF:-lo}
cat >/tmp/node.sh <<'EON'
#!/bin/sh
export WEFT_NODE_ID=$((LOCAL_RANK * NODES / LOCAL_WORLD_SIZE))
exec python3 "$@"
EON
chmod +x /tmp/node.sh
nvidia-smi -L >"$OUT/machine.txt"
run() { # name nproc nodes conns limit
  local name=$1 np=$2 nodes=$3 conns=$4 lim=$5 t0=$SECONDS
  NODES=$nodes CUDA_DEVICE_MAX_CONNECTIONS=$conns LD_PRELOAD=$PWD/.gpu/libweft_nccl.so timeout -k 5 "$lim" \
    torchrun --nproc-per-node "$np" --master-port $((29500 + RANDOM % 1000)) --no-python /tmp/node.sh \
    examples/torch/dropin_check.py --no-graph --dtypes float32,bfloat16 --quiet --timeout 60 >"$OUT/$name.log" 2>&1
  local rc=$?
  echo "$name rc=$rc $((SECONDS - t0))s $(grep -E 'passed|failed' "$OUT/$name.log" | tail -n 1)" | tee -a "$OUT/summary.txt"
}
run two-nodes-x1-conn1 2 2 1 100
run two-nodes-x2-conn1 4 2 1 150
run two-nodes-x2-conn8 4 2 8 150
cat "$OUT/summary.txt"
