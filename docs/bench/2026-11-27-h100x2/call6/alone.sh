#!/usr/bin/env bash
# Call 6 (2026-11-27, 2×H100): hal/ucx sends a put that no signal follows (an LL put) from host
# memory registered directly as a message of its own (kind 4) instead of a ucp_put_nbx, which
# UCX's TCP transport emulates with an active message and an acknowledgement back (new: the
# working tree after cb194b1; old: cb194b1). (1) CPU: BenchmarkUCXPingPong over TCP (new
# binary: "lone" is the ucp_put_nbx path, "lone-message" the new one). (2) GPU: 2 emulated nodes
# over UCX beside NCCL's sockets, every collective at 64 B – 64 KB (×4, 20 warm-up and 200
# timed iterations), old / new / old / new.
set -u
tar -xzf .gpuz/bundle.tgz
B=$PWD/.gpu
if ! ldconfig -p | grep -q 'libucp.so.0 '; then
  export LD_LIBRARY_PATH="$B/ucx" UCX_MODULE_DIR="$B/ucx/ucx"
fi
W=$(mktemp -d /tmp/alone.XXXXXX)
for v in old new; do gunzip -c .gpuz/x/${v}weft.gz >"$W/${v}weft"; chmod +x "$W/${v}weft"; done
gunzip -c .gpuz/x/ucx_new.test.gz >"$W/ucx.test" && chmod +x "$W/ucx.test"
(cd hal/ucx && timeout 100 "$W/ucx.test" -test.run XXX -test.bench 'BenchmarkUCXPingPong/tcp' -test.benchtime 5000x) >"$OUT/cpu.txt" 2>&1
ALL="all_reduce all_gather reduce_scatter alltoall broadcast reduce sendrecv"
for r in 1 2; do for v in old new; do
  cp "$W/${v}weft" .gpu/weft
  OUT="$W/u-$v$r" BUDGET=60 NETS=ucx COLLS="$ALL" MAXB=64K FACTOR=4 SPLIT=1M SMALLN=200 bash scripts/gpu-net.sh >"$W/u-$v$r.log" 2>&1
done; done
for d in u-old1 u-new1 u-old2 u-new2; do
  echo "== $d"; grep -h -E " (ok|FAIL|TIMEOUT)" "$W/$d/summary.txt" | awk '{print $1, $2}' | tr '\n' ' '; echo; python3 scripts/net-sum.py "$W/$d"
done >"$OUT/sum.txt" 2>&1
rm -f "$W"/*weft "$W"/*.test
tar -C "$W" -czf "$OUT/all.tgz" .
grep -E "Bench" "$OUT/cpu.txt"; grep -v "^bench" "$OUT/sum.txt"
