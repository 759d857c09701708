set -u
tar -xzf .gpuz/bundle.tgz
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1; unset WEFT_NVLS
export NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_NET=Socket NCCL_SOCKET_IFNAME=lo WEFT_SOCKET_IFNAME=lo
if ! ldconfig -p | grep -q 'libucp.so.0 '; then export LD_LIBRARY_PATH=$PWD/.gpu/ucx UCX_MODULE_DIR=$PWD/.gpu/ucx/ucx; echo "carried UCX"; fi
T0=$(date +%s)
D=$OUT/m; mkdir -p $D
one() { # name net coll range env...
  local name=$1 n=$2 c=$3 r=$4; shift 4
  [ $(( $(date +%s)-T0 )) -gt 420 ] && { echo "skip $name $c"; return; }
  local args=(-b 64 -e 16K -f 16 -w 50 -n 300)
  [ $r = big ] && args=(-b 256K -e 64M -f 16 -w 3 -n 20)
  env WEFT_NET=$n "$@" timeout 60 .gpu/weft run --nproc 2 --nodes 2 -- .gpu/weft bench $c "${args[@]}" -d float --hal nvlink --baseline nccl -J $D/$name-$r-$c.json > $D/$name-$r-$c.log 2>&1
  echo "$name $r $c rc=$? $(( $(date +%s)-T0 ))s"
}
for c in all_gather all_reduce reduce_scatter alltoall broadcast reduce sendrecv; do
  one sock-n2s0 socket $c small WEFT_SOCKET_NSOCKS=2 WEFT_SOCKET_SPIN_US=0
  one sock-n1s50 socket $c small WEFT_SOCKET_NSOCKS=1 WEFT_SOCKET_SPIN_US=50
  one ucx ucx $c small
done
for c in all_gather all_reduce sendrecv broadcast; do
  one sock-n2s0 socket $c big WEFT_SOCKET_NSOCKS=2 WEFT_SOCKET_SPIN_US=0
  one sock-n1s50 socket $c big WEFT_SOCKET_NSOCKS=1 WEFT_SOCKET_SPIN_US=50
  one sock-n2s50 socket $c big WEFT_SOCKET_NSOCKS=2 WEFT_SOCKET_SPIN_US=50
done
python3 .gpuz/netsum.py $D > $OUT/sum.txt 2>&1; cat $OUT/sum.txt
tar -czf $OUT/m.tgz -C $OUT m && rm -rf $D
