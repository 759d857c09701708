set -u
tar -xzf .gpuz/bundle.tgz
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1; unset WEFT_NVLS
export NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_NET=Socket NCCL_SOCKET_IFNAME=lo WEFT_SOCKET_IFNAME=lo
if ! ldconfig -p | grep -q 'libucp.so.0 '; then export LD_LIBRARY_PATH=$PWD/.gpu/ucx UCX_MODULE_DIR=$PWD/.gpu/ucx/ucx; echo "carried UCX"; fi
T0=$(date +%s)
D=$OUT/p; mkdir -p $D
one() { # name net coll env...
  local name=$1 n=$2 c=$3; shift 3
  [ $(( $(date +%s)-T0 )) -gt 200 ] && { echo "skip $name $c"; return; }
  env WEFT_NET=$n "$@" timeout 40 .gpu/weft run --nproc 2 --nodes 2 -- .gpu/weft bench $c -b 64 -e 16K -f 16 -w 50 -n 300 -d float --hal nvlink --baseline nccl -J $D/$name-$c.json > $D/$name-$c.log 2>&1
  echo "$name $c rc=$? $(( $(date +%s)-T0 ))s"
}
for c in broadcast reduce sendrecv all_gather; do
  for s in 50 200 1000; do one ucx-s$s ucx $c WEFT_UCX_SPIN_US=$s; done
  one sock socket $c
done
python3 .gpuz/netsum.py $D > $OUT/sum.txt 2>&1; cat $OUT/sum.txt
tar -czf $OUT/p.tgz -C $OUT p && rm -rf $D
