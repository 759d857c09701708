#!/usr/bin/env bash
# Call 2 (2026-11-27, 2-GPU host): is the 64 B cycle between 2 emulated nodes paced by the host's
# launches? The same collectives over sockets (and UCX) with plain launches (-n 200) and with the
# timed iterations captured in a CUDA graph (-n 50 -G 4), alternated twice, NCCL's socket
# transport beside in every run. Here: .gpuz/x/weft (HEAD), .gpuz/x/ucx (libucx0's libraries).
set -u
tar -xzf .gpuz/x.tgz -C .gpuz
X=.gpuz/x
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1; unset WEFT_NVLS
export NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_NET=Socket
export LD_LIBRARY_PATH=$PWD/$X/ucx:${LD_LIBRARY_PATH:-} UCX_MODULE_DIR=$PWD/$X/ucx/ucx
IF=$(ip -o -4 addr show up 2>/dev/null | awk '$2 != "lo" {print $2; exit}')
export NCCL_SOCKET_IFNAME=${IF:-lo} WEFT_SOCKET_IFNAME=${IF:-lo}
mkdir -p "$OUT/json"
T0=$SECONDS
for round in 1 2; do
  for g in plain graph; do
    args="-n 200"; [ $g = graph ] && args="-n 50 -G 4"
    for net in socket ucx; do
      for c in all_gather reduce_scatter sendrecv broadcast; do
        [ $((SECONDS - T0)) -gt ${BUDGET:-300} ] && { echo "budget: stop before $round $g $net $c"; break 4; }
        WEFT_NET=$net timeout 60 $X/weft run --nproc 2 --nodes 2 -- $X/weft bench $c -b 64 -e 16K -f 16 -w 20 $args -d float \
          --hal nvlink --baseline nccl -J "$OUT/json/r$round-$g-$net-$c.json" >"$OUT/json/r$round-$g-$net-$c.log" 2>&1
        echo "r$round $g $net $c rc $?"
      done
    done
  done
done
python3 scripts/net-sum.py "$OUT/json" >"$OUT/sum.txt"
cat "$OUT/sum.txt"
