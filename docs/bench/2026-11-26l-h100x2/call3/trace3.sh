# Call 3: the timeline (WEFT_PROXY_TRACE) of 256 KB Broadcast and Reduce over
# sockets and UCX, the one-way windowed plans that trail NCCL's sockets most.
set -u
tar -xzf .gpuz/bundle.tgz
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1; unset WEFT_NVLS
export NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_NET=Socket NCCL_SOCKET_IFNAME=lo WEFT_SOCKET_IFNAME=lo
if ! ldconfig -p | grep -q 'libucp.so.0 '; then export LD_LIBRARY_PATH=$PWD/.gpu/ucx UCX_MODULE_DIR=$PWD/.gpu/ucx/ucx; echo "carried UCX"; fi
T0=$(date +%s)
D=$OUT/t; mkdir -p $D
one() { # name net coll size
  local name=$1 n=$2 c=$3 s=$4
  mkdir -p $D/$name-$c-$s
  env WEFT_NET=$n WEFT_PROXY_TRACE=$D/$name-$c-$s timeout 40 .gpu/weft run --nproc 2 --nodes 2 -- .gpu/weft bench $c -b $s -e $s -w 20 -n 200 -d float --hal nvlink --baseline nccl -J $D/$name-$c-$s.json > $D/$name-$c-$s.log 2>&1
  echo "$name $c $s rc=$? $(( $(date +%s)-T0 ))s $(ls $D/$name-$c-$s | wc -l) traces"
}
for c in broadcast reduce; do for s in 256K 1M; do one sock socket $c $s; one ucx ucx $c $s; done; done
one sock socket all_gather 256K
python3 .gpuz/netsum.py $D > $OUT/sum.txt 2>&1; cat $OUT/sum.txt
tar -czf $OUT/t.tgz -C $OUT t && rm -rf $D
