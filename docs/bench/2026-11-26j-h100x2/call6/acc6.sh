set -u
tar -xzf .gpuz/bundle.tgz
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1; unset WEFT_NVLS
T0=$(date +%s); t() { echo "$(( $(date +%s)-T0 ))s"; }
D=$OUT/a; mkdir -p $D
CB=examples/cbench/cbench
make -C examples/cbench CFLAGS='-O2 -Wall' >/dev/null 2>&1
W=(env LD_PRELOAD=$PWD/.gpu/libweft_nccl.so WEFT_NCCL_FALLBACK=0 WEFT_DEBUG=WARN)
N=(env -u LD_PRELOAD NCCL_DEBUG=WARN)
# 1 GB: bfloat16 every collective, float scatter for NCCL (cut short last call), registered p2p
B1=(-g 2 -d bfloat16 -b 1G -e 1G -w 3 -n 10 -G 10 -c 1 -p 0)
timeout 80 "${W[@]}" $CB "${B1[@]}" > $D/weft-1g-bf16.log 2>&1; echo "weft 1g bf16 rc=$? $(tail -1 $D/weft-1g-bf16.log) $(t)"
timeout 80 "${N[@]}" $CB "${B1[@]}" > $D/nccl-1g-bf16.log 2>&1; echo "nccl 1g bf16 rc=$? $(tail -1 $D/nccl-1g-bf16.log) $(t)"
S1=(-g 2 -t scatter -d float -b 1G -e 1G -w 3 -n 10 -G 10 -c 1 -p 0)
timeout 30 "${N[@]}" $CB "${S1[@]}" > $D/nccl-1g-float-scatter.log 2>&1; echo "nccl 1g scatter rc=$? $(t)"
R1=(-g 2 -t sendrecv,gather,scatter -R 1 -b 1G -e 1G -w 3 -n 10 -G 10 -c 1 -p 0)
timeout 45 "${W[@]}" $CB "${R1[@]}" > $D/weft-1g-reg.log 2>&1; echo "weft 1g reg rc=$? $(tail -1 $D/weft-1g-reg.log) $(t)"
timeout 45 "${N[@]}" $CB "${R1[@]}" > $D/nccl-1g-reg.log 2>&1; echo "nccl 1g reg rc=$? $(tail -1 $D/nccl-1g-reg.log) $(t)"
# AllGather 256 MB-1 GB: the copy-engine default against the SM plan (WEFT_CE_MIN_BYTES=0), float
A1=(-g 2 -t allgather -d float -b 256M -e 1G -f 2 -w 3 -n 10 -G 10 -c 1 -p 0)
timeout 40 "${W[@]}" $CB "${A1[@]}" > $D/weft-ag-ce.log 2>&1; echo "ag ce rc=$? $(t)"
timeout 40 "${W[@]}" WEFT_CE_MIN_BYTES=0 $CB "${A1[@]}" > $D/weft-ag-sm.log 2>&1; echo "ag sm rc=$? $(t)"
timeout 40 "${N[@]}" $CB "${A1[@]}" > $D/nccl-ag.log 2>&1; echo "ag nccl rc=$? $(t)"
# the network, 2 emulated nodes, sockets and UCX
NETS="socket ucx" COLLS="all_gather all_reduce broadcast sendrecv" MAXB=16M FACTOR=16 BUDGET=120 bash .gpu/gpu-net.sh > $D/net.log 2>&1
echo "net rc=$? $(t)"; grep -A20 "== summary" $D/net.log | head -12
cp $OUT/bench-*.json $D/ 2>/dev/null; cp $OUT/logs.tar.gz $D/net-logs.tar.gz 2>/dev/null; rm -f $OUT/bench-*.json $OUT/logs.tar.gz $OUT/summary.txt
echo "shm: $(ls /dev/shm | grep -ci weft)"
tar -czf $OUT/a.tgz -C $OUT a && rm -rf $D
