#!/usr/bin/env bash
# Call 7 (2026-11-27l): the transports' CPU floors on the 2×H100 host, this build (peeking socket
# receivers): hal/socket's and hal/ucx's lone ping-pong, exchange (a 2-rank AllGather's host
# legs) and 16 MiB put bandwidth over loopback TCP (UCX also over shared memory), beside lb2's
# raw loopback exchange and UCX's own ucx_perftest where the host has it. CPU only.
# Run from the repository root with .gpuz carried (make gpu-bundle-pkgs PKGS="./hal/socket ./hal/ucx", lb2).
set -u
tar -xzf .gpuz/bundle.tgz
B=$PWD/.gpu
P=$OUT/printed.txt
exec > >(tee -a "$P") 2>&1
date -u; nproc; ldconfig -p | grep -E "libucp" | head -2; which ucx_perftest ucx_info
export WEFT_REQUIRE=ucx
echo "== lb2 (raw loopback, 20000 messages)"
for r in 1 2; do for m in ex-uni ex-bi pp-uni pp-bi; do timeout 20 $B/lb2 $m 20000; done; done
echo "== hal/socket"
(cd hal/socket && timeout 100 $B/hal_socket.test -test.run XXX -test.bench 'Exchange|PingPong/lone|SocketPut/conns=1' -test.benchtime 20000x -test.count 2 2>&1 | grep -E "^Bench|ok|FAIL|GB/s")
echo "== hal/ucx"
(cd hal/ucx && timeout 150 $B/hal_ucx.test -test.run XXX -test.bench 'Exchange|PingPong/(tcp|shm)/lone' -test.benchtime 5000x -test.count 2 2>&1 | grep -E "^Bench|ok|FAIL|skip")
(cd hal/ucx && timeout 100 $B/hal_ucx.test -test.run XXX -test.bench 'UCXPut/tcp/staging' -test.benchtime 20x -test.count 2 2>&1 | grep -E "^Bench|ok|FAIL|skip")
if command -v ucx_perftest >/dev/null; then
  echo "== ucx_perftest ucp_am_lat / ucp_put_lat over tcp (loopback)"
  for t in ucp_am_lat ucp_put_lat; do
    UCX_TLS=tcp UCX_NET_DEVICES=lo timeout 30 ucx_perftest -t $t -n 20000 -s 64 -p 13377 > /tmp/srv.txt 2>&1 &
    sleep 1
    UCX_TLS=tcp UCX_NET_DEVICES=lo timeout 30 ucx_perftest 127.0.0.1 -t $t -n 20000 -s 64 -p 13377 2>&1 | tail -n 4
    wait
  done
fi
date -u
