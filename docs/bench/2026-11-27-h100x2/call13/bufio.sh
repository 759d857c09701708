#!/usr/bin/env bash
# Call 13 (2026-11-27, 2×H100 host, CPU only): hal/socket's receive buffer of 4 KiB (b) against
# 64 KiB (a, the parent): with 64 KiB, up to 64 KiB of each large frame is read into the buffer
# and copied again; with 4 KiB, payload reads of 4 KiB and more go straight into place.
# BenchmarkSocketPut (64 MiB, 512 KiB frames, 1/2/4 connections) and BenchmarkSocketPingPong,
# alternated three times.
set -u
W=$(mktemp -d /tmp/bufio.XXXXXX)
for v in a b; do gunzip -c .gpuz/x/sock_$v.test.gz >"$W/sock_$v.test"; chmod +x "$W/sock_$v.test"; done
cd hal/socket
for r in 1 2 3; do for v in a b; do
  echo "== $v rep $r"
  "$W/sock_$v.test" -test.run XXX -test.bench 'BenchmarkSocketPut' -test.benchtime 40x 2>&1 | grep Bench
  "$W/sock_$v.test" -test.run XXX -test.bench 'BenchmarkSocketPingPong/lone' -test.benchtime 20000x 2>&1 | grep Bench
done; done >"$OUT/bufio.txt" 2>&1
cat "$OUT/bufio.txt"
