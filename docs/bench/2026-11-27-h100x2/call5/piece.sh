#!/usr/bin/env bash
# Call 5 (2026-11-27, 2×H100): a frame's first writev capped at 64 KiB (new, e61c86b)
# against 0a95729 (old, the bundle's weft), 2 emulated nodes over sockets beside NCCL's sockets:
# every collective at 64 B – 1 MB (×4, 20 warm-up + 200 timed iterations), old / new / old / new;
# all_gather, alltoall, broadcast and sendrecv at 16 and 64 MB (20 iterations), old / new.
set -u
tar -xzf .gpuz/bundle.tgz
W=$(mktemp -d /tmp/piece.XXXXXX)
cp .gpu/weft "$W/oldweft"
gunzip -c .gpuz/x/newweft.gz >"$W/newweft" && chmod +x "$W/newweft"
ALL="all_reduce all_gather reduce_scatter alltoall broadcast reduce sendrecv"
for r in 1 2; do for v in old new; do
  cp "$W/${v}weft" .gpu/weft
  OUT="$W/m-$v$r" BUDGET=60 NETS=socket COLLS="$ALL" MAXB=1M FACTOR=4 SPLIT=2M SMALLN=200 bash scripts/gpu-net.sh >"$W/m-$v$r.log" 2>&1
done; done
for v in old new; do
  cp "$W/${v}weft" .gpu/weft
  OUT="$W/l-$v" BUDGET=60 NETS=socket COLLS="all_gather alltoall broadcast sendrecv" MAXB=64M FACTOR=4 SPLIT=16M SMALLN=0 bash scripts/gpu-net.sh >"$W/l-$v.log" 2>&1
done
for d in m-old1 m-new1 m-old2 m-new2 l-old l-new; do
  echo "== $d"; grep -h -E " (ok|FAIL|TIMEOUT)" "$W/$d/summary.txt" | awk '{print $1, $2}' | tr '\n' ' '; echo; python3 scripts/net-sum.py "$W/$d"
done >"$OUT/sum.txt" 2>&1
rm -f "$W"/*weft
tar -C "$W" -czf "$OUT/all.tgz" .
cat "$OUT/sum.txt" | grep -v "^bench" ; echo
