tar -xzf .gpuz/bundle.tgz
export NCCL_NVLS_ENABLE=0; unset WEFT_NVLS
CB=examples/cbench/cbench
make -C examples/cbench CFLAGS='-O2 -Wall' >/dev/null 2>&1
PA=(-g 2 -t gather,scatter,sendrecv -b 2M -e 128M -f 2 -w 3 -n 20 -G 10 -c 1 -p 0)
mkdir -p $OUT/relax
env -u LD_PRELOAD NCCL_DEBUG=WARN timeout 60 $CB "${PA[@]}" > $OUT/relax/nccl.log 2>&1
for lib in base:.gpu/libweft_nccl.so data:.gpuz/exp2/libweft_nccl.so both:.gpuz/exp1/libweft_nccl.so; do
  for sh in default 44x1024w2Md8 44x1024w1Md16; do
    v=$sh; [ "$sh" = default ] && v=
    env LD_PRELOAD="$PWD/${lib#*:}" WEFT_NCCL_FALLBACK=0 WEFT_DEBUG=WARN WEFT_P2P_SHAPE="$v" timeout 60 $CB "${PA[@]}" > $OUT/relax/${lib%%:*}-$sh.log 2>&1
    echo "${lib%%:*} $sh rc=$? $(grep -h 'wrong elements' $OUT/relax/${lib%%:*}-$sh.log)"
  done
done
