set -u
tar -xzf .gpuz/bundle.tgz
gunzip -c .gpuz/old/weft.gz > /tmp/weftO && chmod +x /tmp/weftO
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1; unset WEFT_NVLS
export NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_NET=Socket NCCL_SOCKET_IFNAME=lo WEFT_SOCKET_IFNAME=lo
T0=$(date +%s)
D=$OUT/s; mkdir -p $D
one() { # name binary coll
  local name=$1 w=$2 c=$3
  [ $(( $(date +%s)-T0 )) -gt 140 ] && { echo "skip $name $c"; return; }
  env WEFT_NET=socket timeout 30 $w run --nproc 2 --nodes 2 -- $w bench $c -b 64 -e 1K -f 16 -w 100 -n 2000 -d float --hal nvlink -J $D/$name-$c.json > $D/$name-$c.log 2>&1
  echo "$name $c rc=$? $(( $(date +%s)-T0 ))s"
}
for r in 1 2 3; do
  for c in all_gather all_reduce reduce_scatter broadcast; do
    one O$r /tmp/weftO $c
    one N$r .gpu/weft $c
  done
done
python3 .gpuz/netsum.py $D > $OUT/sum.txt 2>&1; cat $OUT/sum.txt
