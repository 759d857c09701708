#!/usr/bin/env bash
# Call 10 (2026-11-28, 2×H100): hal/socket's 4 KiB receive buffer (468014c) against 64 KiB
# through the GPUs — the acceptance of call 9 had sockets broadcast at 256 KB 0.78× and 4 MB
# 0.86×, reduce 4 MB 0.90× (2026-11-27's acceptance: ≥ 0.94×). 2 emulated nodes over sockets
# beside NCCL's sockets, broadcast, reduce, reduce_scatter and all_gather at 64 B – 4 MB
# (×16; below 1 MB 20 warm-up + 100 timed iterations), 64K / 4K / 64K / 4K.
set -u
tar -xzf .gpuz/bundle.tgz
W=$(mktemp -d /tmp/bufio.XXXXXX)
gunzip -c .gpuz/x/weft64k.gz >"$W/weft64k" && chmod +x "$W/weft64k"
cp .gpu/weft "$W/weft4k"
C="broadcast reduce reduce_scatter all_gather"
for r in 1 2; do for v in 64k 4k; do
  cp "$W/weft$v" .gpu/weft
  OUT="$W/$v-$r" BUDGET=80 NETS=socket COLLS="$C" MAXB=4M FACTOR=16 SMALLN=100 bash scripts/gpu-net.sh >"$W/$v-$r.log" 2>&1
done; done
for d in 64k-1 4k-1 64k-2 4k-2; do
  echo "== $d"; grep -h -E " (ok|FAIL|TIMEOUT)" "$W/$d/summary.txt" | awk '{print $1, $2}' | tr '\n' ' '; echo; python3 scripts/net-sum.py "$W/$d"
done >"$OUT/sum.txt" 2>&1
cat "$OUT/sum.txt"
