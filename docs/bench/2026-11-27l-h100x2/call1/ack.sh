#!/usr/bin/env bash
# Call 1 (2026-11-27l): what a socket hop's ACK costs on the GPU host. CPU: lb2's loopback floors
# (one connection both ways against one per direction, with and without TCP_QUICKACK 0) and
# hal/socket's Exchange / lone ping-pong benchmarks (immediate against delayed ACKs). GPU: 2
# emulated nodes × 1 GPU over sockets beside NCCL's socket transport, 64 B – 16 KB,
# WEFT_SOCKET_DELAYED_ACK 0 and 1 alternated twice; one traced all_gather 64 B per setting.
# Run from the repository root with .gpuz carried (make gpu-bundle-pkgs PKGS=./hal/socket, lb2).
set -u
tar -xzf .gpuz/bundle.tgz
B=$PWD/.gpu
P=$OUT/printed.txt
exec > >(tee -a "$P") 2>&1
export NCCL_NVLS_ENABLE=0; unset WEFT_NVLS
date -u; hostname; nproc; nvidia-smi -L; uname -r
echo "== lb2 (CPU, 20000 messages each)"
for r in 1 2 3; do for m in pp-bi pp-uni pp-uni-qa0 ex-uni ex-uni-qa0 ex-bi ex-bi-qa0; do timeout 20 $B/lb2 $m 20000; done; done
echo "== hal/socket benchmarks (CPU)"
(cd hal/socket && timeout 60 $B/hal_socket.test -test.run XXX -test.bench 'Exchange|PingPong/lone' -test.benchtime 20000x -test.count 3 2>&1 | grep -E "^Bench|ok|FAIL")
export NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_NET=Socket NCCL_SOCKET_IFNAME=lo WEFT_SOCKET_IFNAME=lo WEFT_NET=socket
run() { # ack coll tag
  timeout 60 env WEFT_SOCKET_DELAYED_ACK=$1 $B/weft run --nproc 2 --nodes 2 -- $B/weft bench $2 -b 64 -e 16K -f 16 -w 20 -n 200 \
    --hal nvlink --baseline nccl -J $OUT/$2-ack$1-$3.json > /tmp/b.txt 2>&1
  echo "-- $2 delayed-ack=$1 run $3 (bytes weft-out wrong weft-in nccl-out nccl-in ratio-out ratio-in plan)"
  grep -E '^ +[0-9]+ ' /tmp/b.txt | tr -s ' ' | cut -d' ' -f2,7,10,11,15,18,21,22,23
  grep -iE "error|fail" /tmp/b.txt | head -3
}
for rep in 1 2; do
  for c in all_gather reduce_scatter all_reduce; do
    for a in 0 1; do run $a $c $rep; done
  done
done
for a in 0 1; do
  rm -rf /tmp/tr$a; mkdir -p /tmp/tr$a
  timeout 60 env WEFT_SOCKET_DELAYED_ACK=$a WEFT_PROXY_TRACE=/tmp/tr$a $B/weft run --nproc 2 --nodes 2 -- $B/weft bench all_gather -b 64 -e 64 -w 20 -n 400 --hal nvlink > /tmp/t.txt 2>&1
  echo "-- trace all_gather 64 B delayed-ack=$a"; grep -E '^ +64 ' /tmp/t.txt | tr -s ' ' | cut -d' ' -f2,7,10
  python3 scripts/net-trace.py /tmp/tr$a --skip 200 2>&1 | head -30
done
date -u
