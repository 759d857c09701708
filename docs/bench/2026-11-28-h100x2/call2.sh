#!/usr/bin/env bash
# Call 2 of docs/bench/2026-11-28-h100x2 (nvidia-h100-x2; the bundle of `make gpu-bundle-accept`
# with .gpu/weft built with the polling spin and .gpu/weft-recvspin the build of call 1):
# 2 emulated nodes over sockets, alternated twice, four variants:
#   recv-pair0  call 1's build, WEFT_SOCKET_PAIR=0 (a connection per engine)
#   recv-pair1  call 1's build, paired connections
#   poll-pair0  a receiver that spins with poll(2) instead of recv, a connection per engine
#   poll-pair1  the polling receiver on paired connections
# all_gather, reduce_scatter, all_reduce 64 B – 16 KB (300 iterations) and all_gather, all_reduce
# at 4 MB and 64 MB. Everything comes back in $OUT/call2.tgz; $OUT/printed.txt is the console.
set -u
tar -xzf .gpuz/bundle.tgz
R=$OUT/call2
mkdir -p "$R"
for v in recv poll; do
  mkdir -p "/tmp/$v" && cp -r .gpu "/tmp/$v/.gpu" && ln -sfn "$PWD/scripts" "/tmp/$v/scripts"
done
mv /tmp/recv/.gpu/weft-recvspin /tmp/recv/.gpu/weft
{
for i in 1 2; do
  for v in recv poll; do
    for p in 0 1; do
      echo "=== pass $i $v-pair$p"
      (cd "/tmp/$v" && OUT=$R/$v-pair$p-$i WEFT_SOCKET_PAIR=$p NETS=socket COLLS="all_gather reduce_scatter all_reduce" \
        MAXB=16K SMALLN=300 BUDGET=40 bash .gpu/gpu-nodes.sh | grep ratio)
      (cd "/tmp/$v" && OUT=$R/$v-pair$p-$i-large WEFT_SOCKET_PAIR=$p NETS=socket COLLS="all_gather all_reduce" \
        MAXB=64M SPLIT=1M SMALLN=0 BUDGET=40 bash .gpu/gpu-nodes.sh | grep ratio | grep -v small)
    done
  done
done
} 2>&1 | tee "$OUT/printed.txt"
tar -C "$OUT" -czf "$OUT/call2.tgz" call2
rm -rf "$R"
