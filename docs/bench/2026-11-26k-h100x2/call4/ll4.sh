set -u
tar -xzf .gpuz/bundle.tgz
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1; unset WEFT_NVLS
export NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_NET=Socket NCCL_SOCKET_IFNAME=lo WEFT_SOCKET_IFNAME=lo
if ! ldconfig -p | grep -q 'libucp.so.0 '; then export LD_LIBRARY_PATH=$PWD/.gpu/ucx UCX_MODULE_DIR=$PWD/.gpu/ucx/ucx; echo "carried UCX"; fi
T0=$(date +%s)
D=$OUT/n; mkdir -p $D
one() { # name net coll env...
  local name=$1 n=$2 c=$3; shift 3
  [ $(( $(date +%s)-T0 )) -gt 300 ] && { echo "skip $name $c"; return; }
  env WEFT_NET=$n "$@" timeout 60 .gpu/weft run --nproc 2 --nodes 2 -- .gpu/weft bench $c -b 16K -e 1M -f 4 -w 20 -n 100 -d float --hal nvlink --baseline nccl -J $D/$name-$c.json > $D/$name-$c.log 2>&1
  echo "$name $c rc=$? $(( $(date +%s)-T0 ))s"
}
for c in broadcast sendrecv all_gather all_reduce reduce; do
  for n in socket ucx; do
    one $n-ll64k $n $c WEFT_PORT_LL_MAX_BYTES=64K
    one $n-ll1m $n $c WEFT_PORT_LL_MAX_BYTES=1M
  done
done
python3 .gpuz/netsum.py $D > $OUT/sum.txt 2>&1; cat $OUT/sum.txt
tar -czf $OUT/n.tgz -C $OUT n && rm -rf $D
