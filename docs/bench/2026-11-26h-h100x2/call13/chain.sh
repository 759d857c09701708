set -u
tar -xzf .gpuz/bundle.tgz
R=$PWD
CB=examples/cbench/cbench
make -C examples/cbench CFLAGS='-O2 -Wall' >/dev/null 2>&1 || gcc -O2 -I/usr/local/cuda/include -o $CB examples/cbench/cbench.c -L/usr/local/cuda/lib64 -Wl,-rpath,/usr/local/cuda/lib64 -l:libnccl.so.2 -lcudart -ldl -lm
mkdir -p $OUT/chain
A=(-g 2 -t broadcast,reduce -b 8 -e 512K -f 4 -w 5 -n 20 -G 10 -c 1 -p 1)
W="env WEFT_NCCL_FALLBACK=0 WEFT_DEBUG=WARN WEFT_ALGO=ring"
run() { name=$1; shift; echo "== $name"; timeout 60 "$@" >$OUT/chain/$name.log 2>&1; echo "rc=$? $(tail -1 $OUT/chain/$name.log)"; }
run nccl env -u LD_PRELOAD NCCL_DEBUG=WARN $CB "${A[@]}"
for rep in 1 2; do
  run new-$rep $W LD_PRELOAD=$R/.gpu/libweft_nccl.so $CB "${A[@]}"
  run old-$rep $W LD_PRELOAD=$R/.gpuz/old/libweft_nccl.so $CB "${A[@]}"
done
run new-eager $W LD_PRELOAD=$R/.gpu/libweft_nccl.so $CB -g 2 -t broadcast,reduce -b 8 -e 512K -f 4 -w 5 -n 200 -G 0 -c 1 -p 1 -d bfloat16
tar -czf $OUT/chain.tgz -C $OUT chain && rm -rf $OUT/chain
