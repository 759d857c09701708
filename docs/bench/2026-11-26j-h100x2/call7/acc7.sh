set -u
tar -xzf .gpuz/bundle.tgz
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1; unset WEFT_NVLS
T0=$(date +%s); t() { echo "$(( $(date +%s)-T0 ))s"; }
D=$OUT/b; mkdir -p $D
CB=examples/cbench/cbench
make -C examples/cbench CFLAGS='-O2 -Wall' >/dev/null 2>&1
W=(env LD_PRELOAD=$PWD/.gpu/libweft_nccl.so WEFT_NCCL_FALLBACK=0 WEFT_DEBUG=WARN)
N=(env -u LD_PRELOAD NCCL_DEBUG=WARN)
A1=(-g 2 -t allgather -d float -b 256M -e 1G -f 2 -w 3 -n 10 -G 10 -c 1 -p 0)
timeout 40 "${W[@]}" $CB "${A1[@]}" > $D/weft-ag.log 2>&1; echo "ag weft rc=$? $(tail -1 $D/weft-ag.log) $(t)"
timeout 40 "${N[@]}" $CB "${A1[@]}" > $D/nccl-ag.log 2>&1; echo "ag nccl rc=$? $(t)"
B1=(-g 2 -t allgather,alltoall,sendrecv,gather,scatter -d bfloat16 -b 1G -e 1G -w 3 -n 10 -G 10 -c 1 -p 0)
timeout 75 "${W[@]}" $CB "${B1[@]}" > $D/weft-1g-bf16.log 2>&1; echo "weft 1g bf16 rc=$? $(tail -1 $D/weft-1g-bf16.log) $(t)"
timeout 75 "${N[@]}" $CB "${B1[@]}" > $D/nccl-1g-bf16.log 2>&1; echo "nccl 1g bf16 rc=$? $(tail -1 $D/nccl-1g-bf16.log) $(t)"
echo "shm: $(ls /dev/shm | grep -ci weft)"
tar -czf $OUT/b.tgz -C $OUT b && rm -rf $D
