#!/usr/bin/env bash
# Call 2 (2026-11-27, 4×H100): the hierarchical plans' blocks across 2 emulated nodes × 2 GPUs over
# sockets. Call 1 found them at 0.18–0.53× NCCL at 256 KB with 32 blocks: every block pushes its
# own put, signal and flush per window, a frame each over the network. Variants, each beside NCCL
# (NCCL_HOSTID per emulated node, its socket transport between them) in the same processes:
#   v32: the default (LL port plans up to 16 KB, then 2PH with 32x1024 blocks);
#   v4:  WEFT_HB_SHAPE=4x1024w8M (2PH with 4 blocks);
#   v1:  WEFT_HB_SHAPE=1x1024w8M and WEFT_PORT_LL_MAX_BYTES=0 (2PH with 1 block at every size).
# Run from the repository root after `make gpu-bundle-four`.
set -u
tar -xzf .gpuz/bundle.tgz
export NCCL_NVLS_ENABLE=0
unset WEFT_NVLS WEFT_ENGINE_WAITS
B=$PWD/.gpu
export NCCL_NET=Socket NCCL_SOCKET_IFNAME=lo WEFT_SOCKET_IFNAME=lo WEFT_NET=socket
T0=$SECONDS
for c in all_reduce all_gather reduce_scatter; do
  for v in v32 v4 v1; do
    case $v in
      v32) E=() ;;
      v4) E=(WEFT_HB_SHAPE=4x1024w8M) ;;
      v1) E=(WEFT_HB_SHAPE=1x1024w8M WEFT_PORT_LL_MAX_BYTES=0) ;;
    esac
    left=$((540 - (SECONDS - T0)))
    [ "$left" -lt 25 ] && { echo "== $c $v: skipped, $left s left"; continue; }
    lim=$((left < 50 ? left : 50))
    timeout "$lim" env "${E[@]}" "$B/weft" run --nproc 4 --nodes 2 -- sh -c 'NCCL_HOSTID=emul$WEFT_NODE_ID exec "$0" "$@"' \
      "$B/weft" bench "$c" -b 64 -e 64M -f 16 -w 5 -n 40 --hal nvlink --baseline nccl -J "$OUT/$c-$v.json" >"$OUT/$c-$v.txt" 2>&1
    echo "== $c $v rc $? ($((SECONDS - T0)) s)"
    grep -E '^ +[0-9]+ ' "$OUT/$c-$v.txt" | tr -s ' ' | cut -d' ' -f2,7,10,11,15,18,21,22,23
    grep -E 'Out of bounds|rror' "$OUT/$c-$v.txt" | head -3
  done
done
