# Call 10: UCX's TCP settings for one stream on this host: the CPU
# benchmark of one 16 MiB put (BenchmarkUCXPut, registered host memory)
# under UCX_TCP_* variants, then 4-64 MB Broadcast over UCX with the
# variants beside NCCL's sockets.
set -u
tar -xzf .gpuz/bundle.tgz
gunzip -c .gpuz/ucx.test.gz > /tmp/ucx.test && chmod +x /tmp/ucx.test
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1; unset WEFT_NVLS
export NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_NET=Socket NCCL_SOCKET_IFNAME=lo WEFT_SOCKET_IFNAME=lo
if ! ldconfig -p | grep -q 'libucp.so.0 '; then export LD_LIBRARY_PATH=$PWD/.gpu/ucx UCX_MODULE_DIR=$PWD/.gpu/ucx/ucx; echo "carried UCX"; fi
T0=$(date +%s)
V=("X=0" "UCX_TCP_TX_SEG_SIZE=1m UCX_TCP_RX_SEG_SIZE=1m" "UCX_TCP_TX_SEG_SIZE=64k UCX_TCP_RX_SEG_SIZE=64k" "UCX_TCP_SNDBUF=8m UCX_TCP_RCVBUF=8m" "UCX_TCP_PUT_ENABLE=n" "UCX_TCP_SENDV_THRESH=16k")
for v in "${V[@]}"; do
  echo "== $v"
  ( cd /tmp && env $v WEFT_REQUIRE=ucx timeout 30 ./ucx.test -test.run '^$' -test.bench 'BenchmarkUCXPut/tcp/staging0' -test.benchtime 300x -test.count 2 2>&1 | grep -v "no peer" | grep "Benchmark\|FAIL" | awk '{print $NF, $(NF-1)}' | tr '\n' ' ' ); echo
done
echo "cpu $(( $(date +%s)-T0 ))s"
D=$OUT/p; mkdir -p $D
i=0
for v in "${V[@]}"; do
  i=$((i+1))
  [ $(( $(date +%s)-T0 )) -gt 200 ] && break
  env $v WEFT_NET=ucx timeout 60 .gpu/weft run --nproc 2 --nodes 2 -- .gpu/weft bench broadcast -b 4M -e 64M -f 4 -w 3 -n 20 -d float --hal nvlink --baseline nccl -J $D/v$i-broadcast.json > $D/v$i.log 2>&1
  echo "v$i ($v) rc=$? $(( $(date +%s)-T0 ))s"
done
python3 .gpuz/netsum.py $D > $OUT/sum.txt 2>&1; cat $OUT/sum.txt
