#!/usr/bin/env bash
# Call 3 (2026-11-27, 2×H100): hal/socket's frames through descriptors detached from Go's
# netpoller (rawconn_linux.go) against the parent build (ba8f3c1), in one call.
# (1) CPU: BenchmarkSocketPingPong of both builds, alternated twice, and the loopback floor (lb).
# (2) GPU, 2 emulated nodes over sockets beside NCCL's sockets: every collective at 64 B–256 KB
#     (×16, 20 warm-up + 200 timed iterations), old / new / old / new; all_gather, all_reduce,
#     broadcast and sendrecv at 4–64 MB (×4, 20 iterations), old / new.
set -u
tar -xzf .gpuz/bundle.tgz
W=$(mktemp -d /tmp/raw.XXXXXX)
gunzip -c .gpuz/old/weft.gz >"$W/oldweft" && chmod +x "$W/oldweft"
cp .gpu/weft "$W/newweft"
for v in old new; do gunzip -c .gpuz/x/socket_$v.test.gz >"$W/socket_$v.test"; chmod +x "$W/socket_$v.test"; done
{
  for i in 1 2; do for v in old new; do
    echo "== $v"; (cd hal/socket && "$W/socket_$v.test" -test.run XXX -test.bench 'BenchmarkSocketPingPong' -test.benchtime 20000x | grep Bench)
  done; done
  for i in 1 2; do .gpuz/x/lb raw; .gpuz/x/lb netdl; done
} >"$OUT/cpu.txt" 2>&1
ALL="all_reduce all_gather reduce_scatter alltoall broadcast reduce sendrecv"
for r in 1 2; do for v in old new; do
  cp "$W/${v}weft" .gpu/weft
  OUT="$W/s-$v$r" BUDGET=60 NETS=socket COLLS="$ALL" MAXB=256K FACTOR=16 SMALLN=200 bash scripts/gpu-net.sh >"$W/s-$v$r.log" 2>&1
done; done
for v in old new; do
  cp "$W/${v}weft" .gpu/weft
  OUT="$W/l-$v" BUDGET=60 NETS=socket COLLS="all_gather all_reduce broadcast sendrecv" MAXB=64M FACTOR=4 SPLIT=4M SMALLN=0 bash scripts/gpu-net.sh >"$W/l-$v.log" 2>&1
done
for d in s-old1 s-new1 s-old2 s-new2 l-old l-new; do
  echo "== $d"; grep -h -E " (ok|FAIL|TIMEOUT)" "$W/$d/summary.txt" | awk '{print $1, $2}' | tr '\n' ' '; echo; python3 scripts/net-sum.py "$W/$d"
done >"$OUT/sum.txt" 2>&1
rm -f "$W"/*.test "$W"/*weft
tar -C "$W" -czf "$OUT/all.tgz" .
cat "$OUT/cpu.txt"; echo; cat "$OUT/sum.txt"
