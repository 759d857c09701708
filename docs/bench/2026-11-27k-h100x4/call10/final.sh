#!/usr/bin/env bash
# Call 10 (2026-11-27, 4×H100): the session's final build, in one short call.
#   a: one node, every collective through the C ABI (cbench -g 4, 8 B – 8 MB by 16, every element
#      checked) beside NCCL: the slot templates gained an argument, every kernel is regenerated;
#   b: 2 emulated nodes × 1 GPU (issue 22's shape; GPUs 0–1) over sockets, AllGather, AllReduce,
#      ReduceScatter 64 B – 16 KB beside NCCL's sockets;
#   c: 2 emulated nodes × 2 GPUs, AllReduce, AllGather, ReduceScatter 64 B – 64 MB beside NCCL
#      (NCCL_HOSTID per emulated node).
# Run from the repository root after `make gpu-bundle-four`.
set -u
tar -xzf .gpuz/bundle.tgz
export NCCL_NVLS_ENABLE=0
unset WEFT_NVLS WEFT_ENGINE_WAITS
T0=$SECONDS
B=$PWD/.gpu
make -B -C examples/cbench CFLAGS='-O2 -Wall' >/dev/null 2>&1 || make -B -C examples/cbench CFLAGS='-O2 -Wall' OMP= >/dev/null
CB=examples/cbench/cbench
ARGS=(-g 4 -d float -b 8 -e 8M -f 16 -w 3 -n 10 -G 5 -c 1 -p 0)
env -u LD_PRELOAD NCCL_DEBUG=WARN timeout 60 $CB "${ARGS[@]}" >"$OUT/a-nccl.log" 2>&1; echo "== a nccl rc $?"
env LD_PRELOAD="$B/libweft_nccl.so" WEFT_NCCL_FALLBACK=0 WEFT_DEBUG=WARN WEFT_REQUIRE=nvlink timeout 60 $CB "${ARGS[@]}" >"$OUT/a-weft.log" 2>&1; echo "== a weft rc $? ($((SECONDS - T0)) s)"
python3 scripts/cbench-ratios.py "$OUT/a-nccl.log" "$OUT/a-weft.log"
grep -h -E "wrong elements in all" "$OUT"/a-*.log
export NCCL_NET=Socket NCCL_SOCKET_IFNAME=lo WEFT_SOCKET_IFNAME=lo WEFT_NET=socket
for c in all_gather all_reduce reduce_scatter; do
  CUDA_VISIBLE_DEVICES=0,1 timeout 30 "$B/weft" run --nproc 2 --nodes 2 -- sh -c 'NCCL_HOSTID=emul$WEFT_NODE_ID exec "$0" "$@"' \
    "$B/weft" bench "$c" -b 64 -e 16K -f 16 -w 20 -n 200 --hal nvlink --baseline nccl -J "$OUT/b-$c.json" >"$OUT/b-$c.txt" 2>&1
  echo "== b $c rc $? ($((SECONDS - T0)) s)"
  grep -E '^ +[0-9]+ ' "$OUT/b-$c.txt" | tr -s ' ' | cut -d' ' -f2,7,10,11,15,18,21,22,23
done
for c in all_reduce all_gather reduce_scatter; do
  timeout 40 "$B/weft" run --nproc 4 --nodes 2 -- sh -c 'NCCL_HOSTID=emul$WEFT_NODE_ID exec "$0" "$@"' \
    "$B/weft" bench "$c" -b 64 -e 64M -f 16 -w 3 -n 20 --hal nvlink --baseline nccl -J "$OUT/c-$c.json" >"$OUT/c-$c.txt" 2>&1
  echo "== c $c rc $? ($((SECONDS - T0)) s)"
  grep -E '^ +[0-9]+ ' "$OUT/c-$c.txt" | tr -s ' ' | cut -d' ' -f2,7,10,11,15,18,21,22,23
  grep -E 'Out of bounds|rror' "$OUT/c-$c.txt" | head -2
done
