#!/usr/bin/env bash
# Call 7 (2026-11-27, 4×H100): call 6 had AllReduce across 2 × 2 about 2× slower than call 5 (4 MB
# 2543 µs against 911) and ReduceScatter 1.5× — the compacted network windows, or the lending? The
# build before the compaction (.gpuz/weft-mirror, commit before "network windows hold only the
# network slots") against this one (.gpu/weft), alternated twice, AllReduce and ReduceScatter
# 256 KB – 16 MB, each beside NCCL (NCCL_HOSTID per emulated node).
# Run from the repository root after `make gpu-bundle-four` and the mirror build in .gpuz/weft-mirror.
set -u
tar -xzf .gpuz/bundle.tgz
export NCCL_NVLS_ENABLE=0
unset WEFT_NVLS WEFT_ENGINE_WAITS
export NCCL_NET=Socket NCCL_SOCKET_IFNAME=lo WEFT_SOCKET_IFNAME=lo WEFT_NET=socket
T0=$SECONDS
for i in 1 2; do
  for v in mirror compact; do
    W=$PWD/.gpu/weft; [ $v = mirror ] && W=$PWD/.gpuz/weft-mirror
    for c in all_reduce reduce_scatter; do
      timeout 40 "$W" run --nproc 4 --nodes 2 -- sh -c 'NCCL_HOSTID=emul$WEFT_NODE_ID exec "$0" "$@"' \
        "$W" bench "$c" -b 256K -e 16M -f 4 -w 3 -n 20 --hal nvlink --baseline nccl -J "$OUT/$c-$v$i.json" >"$OUT/$c-$v$i.txt" 2>&1
      echo "== $c $v$i rc $? ($((SECONDS - T0)) s)"
      grep -E '^ +[0-9]+ ' "$OUT/$c-$v$i.txt" | tr -s ' ' | cut -d' ' -f2,7,10,11,15,18,21,22
    done
  done
done
