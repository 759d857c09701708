set -u
tar -xzf .gpuz/bundle.tgz
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1; unset WEFT_NVLS
export NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_NET=Socket NCCL_SOCKET_IFNAME=lo WEFT_SOCKET_IFNAME=lo
T0=$(date +%s)
D=$OUT/s; mkdir -p $D
nproc; cat /sys/fs/cgroup/cpu.max 2>/dev/null
one() { # name coll env...
  local name=$1 c=$2; shift 2
  env WEFT_NET=socket "$@" timeout 40 .gpu/weft run --nproc 2 --nodes 2 -- .gpu/weft bench $c -b 64 -e 4K -f 64 -w 20 -n ${N:-200} -d float --hal nvlink --baseline nccl -J $D/$name-$c.json > $D/$name-$c.log 2>&1
  echo "$name $c rc=$? $(( $(date +%s)-T0 ))s"
}
for rep in 1 2; do
  for v in d s50 n1 n1s50 n1s200; do
    case $v in d) e=();; s50) e=(WEFT_SOCKET_SPIN_US=50);; n1) e=(WEFT_SOCKET_NSOCKS=1);;
      n1s50) e=(WEFT_SOCKET_NSOCKS=1 WEFT_SOCKET_SPIN_US=50);; n1s200) e=(WEFT_SOCKET_NSOCKS=1 WEFT_SOCKET_SPIN_US=200);; esac
    for c in all_gather broadcast all_reduce sendrecv; do one $v-$rep $c "${e[@]}"; done
  done
done
for v in d n1s50; do
  case $v in d) e=();; n1s50) e=(WEFT_SOCKET_NSOCKS=1 WEFT_SOCKET_SPIN_US=50);; esac
  for c in all_gather broadcast; do one prof-$v $c WEFT_PROXY_PROFILE=1 "${e[@]}"; done
done
tar -czf $OUT/s.tgz -C $OUT s && rm -rf $D
