#!/usr/bin/env bash
# Call 2 (2026-11-27l): receivers that peek a frame they waited for and consume it on their next
# read (WEFT_SOCKET_PEEK=1), against reads that consume at once (0), alternated twice. CPU: lb2's
# floors with peeking readers and hal/socket's Exchange benchmark. GPU: 2 emulated nodes × 1 GPU
# over sockets beside NCCL's socket transport, six collectives 64 B – 16 KB (-n 200) and two at
# 1 – 64 MB. Run from the repository root with .gpuz carried (make gpu-bundle-pkgs PKGS=./hal/socket, lb2).
set -u
tar -xzf .gpuz/bundle.tgz
B=$PWD/.gpu
P=$OUT/printed.txt
exec > >(tee -a "$P") 2>&1
export NCCL_NVLS_ENABLE=0; unset WEFT_NVLS
date -u; hostname; nproc; nvidia-smi -L
echo "== lb2 (CPU, 20000 messages each)"
for r in 1 2; do for m in pp-uni pp-uni-peek pp-bi ex-uni ex-uni-peek ex-bi; do timeout 20 $B/lb2 $m 20000; done; done
echo "== hal/socket benchmarks (CPU)"
(cd hal/socket && timeout 60 $B/hal_socket.test -test.run XXX -test.bench 'Exchange|PingPong/lone' -test.benchtime 20000x -test.count 3 2>&1 | grep -E "^Bench|ok|FAIL")
export NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_NET=Socket NCCL_SOCKET_IFNAME=lo WEFT_SOCKET_IFNAME=lo WEFT_NET=socket
run() { # peek coll tag sizes...
  local pk=$1 c=$2 tag=$3; shift 3
  timeout 90 env WEFT_SOCKET_PEEK=$pk $B/weft run --nproc 2 --nodes 2 -- $B/weft bench $c "$@" \
    --hal nvlink --baseline nccl -J $OUT/$c-peek$pk-$tag.json > /tmp/b.txt 2>&1
  echo "-- $c peek=$pk $tag (bytes weft-out wrong weft-in nccl-out nccl-in ratio-out ratio-in plan)"
  grep -E '^ +[0-9]+ ' /tmp/b.txt | tr -s ' ' | cut -d' ' -f2,7,10,11,15,18,21,22,23
  grep -iE "error|fail" /tmp/b.txt | head -3
}
for rep in 1 2; do
  for c in all_gather reduce_scatter all_reduce alltoall sendrecv broadcast; do
    for a in 0 1; do run $a $c s$rep -b 64 -e 16K -f 16 -w 20 -n 200; done
  done
done
for rep in 1 2; do
  for c in all_gather sendrecv; do
    for a in 0 1; do run $a $c l$rep -b 1M -e 64M -f 8 -w 3 -n 20; done
  done
done
date -u
