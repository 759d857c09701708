set -u
tar -xzf .gpuz/bundle.tgz
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1; unset WEFT_NVLS
export NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_NET=Socket NCCL_SOCKET_IFNAME=lo WEFT_SOCKET_IFNAME=lo
if ! ldconfig -p | grep -q 'libucp.so.0 '; then export LD_LIBRARY_PATH=$PWD/.gpu/ucx UCX_MODULE_DIR=$PWD/.gpu/ucx/ucx; echo "carried UCX"; fi
T0=$(date +%s)
D=$OUT/j; mkdir -p $D
one() { # name net coll LLbound [trace]
  local name=$1 n=$2 c=$3 ll=$4 tr=${5:-}
  [ $(( $(date +%s)-T0 )) -gt 480 ] && { echo "skip $name $c"; return; }
  local extra=()
  [ -n "$tr" ] && { mkdir -p $D/tr-$name-$c; extra=(WEFT_PROXY_TRACE=$D/tr-$name-$c); }
  env WEFT_NET=$n WEFT_PORT_LL_MAX_BYTES=$ll "${extra[@]}" timeout 45 .gpu/weft run --nproc 2 --nodes 2 -- .gpu/weft bench $c -b 64 -e 256K -f 8 -w 20 -n 200 -d float --hal nvlink --baseline nccl -J $D/$name-$c.json > $D/$name-$c.log 2>&1
  echo "$name $c rc=$? $(( $(date +%s)-T0 ))s"
}
for n in socket ucx; do
  for c in all_gather all_reduce reduce_scatter alltoall; do
    one $n-ll $n $c 64K
    one $n-hb $n $c 0
  done
done
one socket-lltr socket all_gather 64K trace
one ucx-lltr ucx all_gather 64K trace
python3 .gpuz/netsum.py $D > $OUT/sum.txt 2>&1; cat $OUT/sum.txt
tar -czf $OUT/j.tgz -C $OUT j && rm -rf $D
