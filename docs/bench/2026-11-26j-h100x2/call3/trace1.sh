set -u
tar -xzf .gpuz/bundle.tgz
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1; unset WEFT_NVLS
export NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_NET=Socket NCCL_SOCKET_IFNAME=lo WEFT_SOCKET_IFNAME=lo
T0=$(date +%s)
D=$OUT/t; mkdir -p $D
one() { # name net coll env...
  local name=$1 n=$2 c=$3; shift 3
  mkdir -p $D/$name-$c
  env WEFT_NET=$n WEFT_PROXY_TRACE=$D/$name-$c "$@" timeout 40 .gpu/weft run --nproc 2 --nodes 2 -- .gpu/weft bench $c -b 64 -e 64 -w 20 -n 300 -d float --hal nvlink --baseline nccl -J $D/$name-$c.json > $D/$name-$c.log 2>&1
  echo "$name $c rc=$? $(( $(date +%s)-T0 ))s $(ls $D/$name-$c | wc -l) traces"
}
for c in all_gather broadcast sendrecv all_reduce; do one sock socket $c; one ucx ucx $c; done
tar -czf $OUT/t.tgz -C $OUT t && rm -rf $D
