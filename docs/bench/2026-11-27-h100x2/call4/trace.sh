#!/usr/bin/env bash
# Call 4 (2026-11-27, 2×H100): the timeline (WEFT_PROXY_TRACE, scripts/net-trace.py) of hops over
# sockets between 2 emulated nodes with the raw descriptors (0a95729): all_gather 64 B,
# sendrecv 16 KB, alltoall 256 KB (1000 iterations after 50 warm-up, NCCL's sockets beside).
set -u
tar -xzf .gpuz/bundle.tgz
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1; unset WEFT_NVLS
export NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_NET=Socket
IF=$(ip -o -4 addr show up 2>/dev/null | awk '$2 != "lo" {print $2; exit}')
export NCCL_SOCKET_IFNAME=${IF:-lo} WEFT_SOCKET_IFNAME=${IF:-lo}
W=$(mktemp -d /tmp/trace.XXXXXX)
one() { # name coll bytes
  mkdir -p "$W/$1"
  WEFT_NET=socket WEFT_PROXY_TRACE="$W/$1" timeout 60 .gpu/weft run --nproc 2 --nodes 2 -- .gpu/weft bench "$2" -b "$3" -e "$3" \
    -w 50 -n 1000 -d float --hal nvlink --baseline nccl >"$W/$1.log" 2>&1
  echo "== $1 ($2 $3 B, rc $?)"; grep -E "^ +$3 " "$W/$1.log" | tr -s ' ' | cut -c1-140
  python3 scripts/net-trace.py "$W/$1" --skip 3000
}
{
  one ag64 all_gather 64
  one sr16k sendrecv 16384
  one a2a256k alltoall 262144
} >"$OUT/trace.txt" 2>&1
cat "$OUT/trace.txt"
