#!/usr/bin/env bash
# Call 3 of docs/bench/2026-11-28-h100x2 (nvidia-h100-x2; the bundle of `make gpu-bundle-accept`
# at the commit "hal/ucx: puts go ahead of a signal waiting for its endpoint flush", with
# .gpu/weft-serial built from its parent): 2 emulated nodes.
#  1. UCX, alternated twice: "serial" (the parent: a put waits behind the signal before it until
#     that signal's flush completes) against "ahead" (issueAhead); broadcast, reduce, sendrecv,
#     all_gather at 64 B – 256 KB (200 iterations) and 4 MB, 64 MB (20).
#  2. Issue 22's run on this build: every collective 64 B – 64 MB over sockets and over UCX,
#     NCCL's socket transport beside (scripts/gpu-nodes.sh).
# Everything comes back in $OUT/call3.tgz; $OUT/printed.txt is the console.
set -u
tar -xzf .gpuz/bundle.tgz
R=$OUT/call3
mkdir -p "$R"
for v in serial ahead; do
  mkdir -p "/tmp/$v" && cp -r .gpu "/tmp/$v/.gpu" && ln -sfn "$PWD/scripts" "/tmp/$v/scripts"
done
mv /tmp/serial/.gpu/weft-serial /tmp/serial/.gpu/weft
{
for i in 1 2; do
  for v in serial ahead; do
    echo "=== pass $i ucx-$v"
    (cd "/tmp/$v" && OUT=$R/ucx-$v-$i NETS=ucx COLLS="broadcast reduce sendrecv all_gather" \
      MAXB=64M SPLIT=1M SMALLN=200 BUDGET=60 bash .gpu/gpu-nodes.sh | grep ratio)
  done
done
echo "=== issue 22 on this build"
OUT=$R/full NETS="socket ucx" BUDGET=240 bash .gpu/gpu-nodes.sh | tail -n 90
} 2>&1 | tee "$OUT/printed.txt"
tar -C "$OUT" -czf "$OUT/call3.tgz" call3
rm -rf "$R"
