set -u
tar -xzf .gpuz/bundle.tgz
gunzip -c .gpuz/varB/weft.gz > /tmp/weftB && gunzip -c .gpuz/varC/weft.gz > /tmp/weftC && chmod +x /tmp/weftB /tmp/weftC
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1; unset WEFT_NVLS
export NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_NET=Socket NCCL_SOCKET_IFNAME=lo WEFT_SOCKET_IFNAME=lo
T0=$(date +%s)
D=$OUT/q; mkdir -p $D
one() { # name binary coll extra-bench-args...
  local name=$1 w=$2 c=$3; shift 3
  [ $(( $(date +%s)-T0 )) -gt 150 ] && { echo "skip $name $c"; return; }
  env WEFT_NET=socket timeout 40 $w run --nproc 2 --nodes 2 -- $w bench $c -b 64 -e 1K -f 16 -w 100 -n 1000 -d float --hal nvlink --baseline nccl -J $D/$name-$c.json "$@" > $D/$name-$c.log 2>&1
  echo "$name $c rc=$? $(( $(date +%s)-T0 ))s"
}
for r in 1 2; do
  for c in all_gather all_reduce; do
    one A$r .gpu/weft $c
    one B$r /tmp/weftB $c
    one C$r /tmp/weftC $c
    one G$r .gpu/weft $c -G 20
  done
done
python3 .gpuz/netsum.py $D > $OUT/sum.txt 2>&1; cat $OUT/sum.txt
grep -h "plan\|rror" $D/G1-all_gather.log | head -5
tar -czf $OUT/q.tgz -C $OUT q && rm -rf $D
