set -u
tar -xzf .gpuz/bundle.tgz
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1; unset WEFT_NVLS
export NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_NET=Socket NCCL_SOCKET_IFNAME=lo WEFT_SOCKET_IFNAME=lo
T0=$(date +%s)
D=$OUT/k; mkdir -p $D
nproc; cat /sys/fs/cgroup/cpu.max 2>/dev/null
one() { # name coll env...
  local name=$1 c=$2; shift 2
  env WEFT_NET=socket "$@" timeout 40 .gpu/weft run --nproc 2 --nodes 2 -- .gpu/weft bench $c -b 64 -e 4096 -f 64 -w 50 -n 1000 -d float --hal nvlink --baseline nccl -J $D/$name-$c.json > $D/$name-$c.log 2>&1
  echo "$name $c rc=$? $(( $(date +%s)-T0 ))s"
}
for rep in 1 2; do
  for c in all_gather all_reduce; do
    one s0n2r$rep $c
    one s50n2r$rep $c WEFT_SOCKET_SPIN_US=50
    one s0n1r$rep $c WEFT_SOCKET_NSOCKS=1
    one s50n1r$rep $c WEFT_SOCKET_SPIN_US=50 WEFT_SOCKET_NSOCKS=1
    one s200n1r$rep $c WEFT_SOCKET_SPIN_US=200 WEFT_SOCKET_NSOCKS=1
  done
done
mkdir -p $D/tr0 $D/tr50
one tr0 all_gather WEFT_PROXY_TRACE=$D/tr0
one tr50 all_gather WEFT_PROXY_TRACE=$D/tr50 WEFT_SOCKET_SPIN_US=50 WEFT_SOCKET_NSOCKS=1
python3 .gpuz/netsum.py $D > $OUT/sum.txt 2>&1; cat $OUT/sum.txt
tar -czf $OUT/k.tgz -C $OUT k && rm -rf $D
