#!/usr/bin/env bash
# Call 9 (2026-11-27, 4×H100): small ReduceScatter across 2 emulated nodes × 2 GPUs over sockets: the
# hierarchical LL plan (L puts per counterpart, the partials over NVLink; .gpu/weft) against the flat
# LL port plan (a frame to every other rank; the build before, .gpuz/weft-prev), and AllReduce
# again (both builds serve it with the hierarchical LL plan: the lending's spread), alternated twice,
# 64 B – 16 KB, each beside NCCL (NCCL_HOSTID per emulated node: NVLink inside, sockets between).
# Run from the repository root after `make gpu-bundle-four` and the build before in .gpuz/weft-prev.
set -u
tar -xzf .gpuz/bundle.tgz
export NCCL_NVLS_ENABLE=0
unset WEFT_NVLS WEFT_ENGINE_WAITS
export NCCL_NET=Socket NCCL_SOCKET_IFNAME=lo WEFT_SOCKET_IFNAME=lo WEFT_NET=socket
T0=$SECONDS
for i in 1 2; do
  for v in flat hier; do
    W=$PWD/.gpu/weft; [ $v = flat ] && W=$PWD/.gpuz/weft-prev
    for c in reduce_scatter all_reduce; do
      timeout 40 "$W" run --nproc 4 --nodes 2 -- sh -c 'NCCL_HOSTID=emul$WEFT_NODE_ID exec "$0" "$@"' \
        "$W" bench "$c" -b 64 -e 16K -f 4 -w 20 -n 200 --hal nvlink --baseline nccl -J "$OUT/$c-$v$i.json" >"$OUT/$c-$v$i.txt" 2>&1
      echo "== $c $v$i rc $? ($((SECONDS - T0)) s)"
      grep -E '^ +[0-9]+ ' "$OUT/$c-$v$i.txt" | tr -s ' ' | cut -d' ' -f2,7,10,11,15,18,21,22,23
      grep -E 'rror' "$OUT/$c-$v$i.txt" | head -2
    done
  done
done
