set -u
tar -xzf .gpuz/bundle.tgz
gunzip -c .gpuz/old/weft.gz > /tmp/weftO && chmod +x /tmp/weftO
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1; unset WEFT_NVLS
export NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_NET=Socket NCCL_SOCKET_IFNAME=lo WEFT_SOCKET_IFNAME=lo
if ! ldconfig -p | grep -q 'libucp.so.0 '; then export LD_LIBRARY_PATH=$PWD/.gpu/ucx UCX_MODULE_DIR=$PWD/.gpu/ucx/ucx; echo "carried UCX"; fi
T0=$(date +%s)
D=$OUT/r; mkdir -p $D
one() { # name binary net coll
  local name=$1 w=$2 n=$3 c=$4
  [ $(( $(date +%s)-T0 )) -gt 170 ] && { echo "skip $name $c"; return; }
  env WEFT_NET=$n timeout 40 $w run --nproc 2 --nodes 2 -- $w bench $c -b 64 -e 16K -f 16 -w 100 -n 1000 -d float --hal nvlink --baseline nccl -J $D/$name-$c.json > $D/$name-$c.log 2>&1
  echo "$name $c rc=$? $(( $(date +%s)-T0 ))s"
}
for r in 1 2; do
  for c in all_gather all_reduce reduce_scatter alltoall broadcast reduce sendrecv; do
    one O$r /tmp/weftO socket $c
    one N$r .gpu/weft socket $c
  done
done
for c in all_gather broadcast sendrecv; do one U .gpu/weft ucx $c; done
python3 .gpuz/netsum.py $D > $OUT/sum.txt 2>&1; cat $OUT/sum.txt
tar -czf $OUT/r.tgz -C $OUT r && rm -rf $D
