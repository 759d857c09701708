#!/usr/bin/env bash
# Call 7 (2026-11-27, 2×H100): where the LL port plans should stop over sockets. Every
# collective at 16–128 KB (×2, 20 warm-up and 200 timed iterations) with WEFT_PORT_LL_MAX_BYTES
# 16K and 64K (the default), alternated twice, 2 emulated nodes beside NCCL's sockets (e9e524b).
set -u
tar -xzf .gpuz/bundle.tgz
W=$(mktemp -d /tmp/llmax.XXXXXX)
gunzip -c .gpuz/x/newweft.gz >.gpu/weft && chmod +x .gpu/weft
ALL="all_reduce all_gather reduce_scatter alltoall broadcast reduce sendrecv"
for r in 1 2; do for ll in 16K 64K; do
  WEFT_PORT_LL_MAX_BYTES=$ll OUT="$W/ll$ll-$r" BUDGET=60 NETS=socket COLLS="$ALL" MAXB=128K FACTOR=2 SPLIT=1M SMALLN=200 \
    bash scripts/gpu-net.sh >"$W/ll$ll-$r.log" 2>&1
done; done
for d in ll16K-1 ll64K-1 ll16K-2 ll64K-2; do
  echo "== $d"; grep -h -E " (ok|FAIL|TIMEOUT)" "$W/$d/summary.txt" | awk '{print $1, $2}' | tr '\n' ' '; echo; python3 scripts/net-sum.py "$W/$d" | awk '$2 >= 16384'
done >"$OUT/sum.txt" 2>&1
tar -C "$W" -czf "$OUT/all.tgz" .
grep -v "^bench" "$OUT/sum.txt"
