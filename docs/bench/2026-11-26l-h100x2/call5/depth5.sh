# Call 5: call 4 again with 50 iterations, 256 KB - 16 MB, each build twice,
# alternated (old, new, old, new), over sockets and UCX, beside NCCL's
# sockets: broadcast, reduce, sendrecv.
set -u
tar -xzf .gpuz/bundle.tgz
gunzip -c .gpuz/old/weft.gz > /tmp/oldweft && chmod +x /tmp/oldweft
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1; unset WEFT_NVLS
export NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_NET=Socket NCCL_SOCKET_IFNAME=lo WEFT_SOCKET_IFNAME=lo
if ! ldconfig -p | grep -q 'libucp.so.0 '; then export LD_LIBRARY_PATH=$PWD/.gpu/ucx UCX_MODULE_DIR=$PWD/.gpu/ucx/ucx; echo "carried UCX"; fi
T0=$(date +%s)
D=$OUT/p; mkdir -p $D
one() { # name bin net coll
  local name=$1 bin=$2 n=$3 c=$4
  [ $(( $(date +%s)-T0 )) -gt 420 ] && { echo "skip $name $c"; return; }
  env WEFT_NET=$n timeout 60 $bin run --nproc 2 --nodes 2 -- $bin bench $c -b 256K -e 16M -f 4 -w 5 -n 50 -d float --hal nvlink --baseline nccl -J $D/$name-$c.json > $D/$name-$c.log 2>&1
  echo "$name $c rc=$? $(( $(date +%s)-T0 ))s"
}
for c in broadcast reduce sendrecv; do
  for net in socket ucx; do
    for r in 1 2; do
      one $net-old$r /tmp/oldweft $net $c
      one $net-new$r .gpu/weft $net $c
    done
  done
done
python3 .gpuz/netsum.py $D > $OUT/sum.txt 2>&1; cat $OUT/sum.txt
tar -czf $OUT/p.tgz -C $OUT p && rm -rf $D
