#!/usr/bin/env bash
# Call 1 found PyTorch's eager checks 25-35x slower with CUDA_DEVICE_MAX_CONNECTIONS=1 than with 8
# (no failure, no hang). This call timestamps every output line (one line per check) to see which
# checks take the time, on emulated nodes and on one node (2 and 4 ranks), all with one queue.
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
  NODES=$nodes CUDA_DEVICE_MAX_CONNECTIONS=$conns PYTHONUNBUFFERED=1 LD_PRELOAD=$PWD/.gpu/libweft_nccl.so timeout -k 5 "$lim" \
    torchrun --nproc-per-node "$np" --master-port $((29500 + RANDOM % 1000)) --no-python /tmp/node.sh \
    examples/torch/dropin_check.py --no-graph --dtypes float32,bfloat16 --timeout 60 2>&1 | while IFS= read -r l; do printf "%s %s\n" "$(date +%s.%N | cut -c1-14)" "$l"; done >"$OUT/$name.log"
  local rc=${PIPESTATUS[0]}
  echo "$name rc=$rc $((SECONDS - t0))s $(grep -E 'passed|failed' "$OUT/$name.log" | tail -n 1)" | tee -a "$OUT/summary.txt"
}
run two-nodes-x1-conn1 2 2 1 100
run two-nodes-x2-conn1 4 2 1 150
run one-node-x4-conn1 4 1 1 120
run one-node-x2-conn1 2 1 1 100
cat "$OUT/summary.txt"
