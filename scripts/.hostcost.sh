set -u
tar -xzf .gpuz/bundle.tgz
export NCCL_NVLS_ENABLE=0; unset WEFT_NVLS
make -C examples/cbench CFLAGS='-O2 -Wall' 2>&1 | tail -3
HA=(-g 2 -t allreduce,allgather,reducescatter,sendrecv -d bfloat16 -b 8 -e 128M -f 64 -w 5 -n 50 -G 0 -c 1 -p 0 -H 1)
for r in 1 2; do
echo "== nccl $r"; timeout 60 env -u LD_PRELOAD NCCL_DEBUG=WARN examples/cbench/cbench "${HA[@]}" 2>&1 | grep -v "^#$" | tail -32
echo "== weft $r"; timeout 60 env LD_PRELOAD=$PWD/.gpu/libweft_nccl.so WEFT_NCCL_FALLBACK=0 WEFT_DEBUG=WARN examples/cbench/cbench "${HA[@]}" 2>&1 | grep -v "^#$" | tail -32
done
echo "== weft-fwd"; timeout 60 env LD_PRELOAD=$PWD/.gpu/libweft_nccl.so WEFT_NCCL_FALLBACK=all WEFT_DEBUG=WARN examples/cbench/cbench "${HA[@]}" 2>&1 | grep -v "^#$" | tail -32
