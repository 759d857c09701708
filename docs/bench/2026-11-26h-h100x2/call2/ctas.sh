set -u
tar -xzf .gpuz/bundle.tgz
CB=examples/cbench/cbench
make -C examples/cbench CFLAGS='-O2 -Wall' >/dev/null 2>&1 || gcc -O2 -I/usr/local/cuda/include -o $CB examples/cbench/cbench.c -L/usr/local/cuda/lib64 -Wl,-rpath,/usr/local/cuda/lib64 -l:libnccl.so.2 -lcudart -ldl -lm
A=(-g 2 -t sendrecv,broadcast,reduce,gather,scatter,allreduce -b 8 -e 64K -f 4 -w 5 -n 20 -G 10 -c 1 -p 0)
mkdir -p $OUT/ctas
run() { name=$1; shift; echo "== $name"; timeout 60 "$@" "${A[@]}" >$OUT/ctas/$name.log 2>&1; tail -1 $OUT/ctas/$name.log; }
run nccl1 env -u LD_PRELOAD NCCL_DEBUG=WARN $CB
for rep in 1 2; do
for m in unset 16 6 3; do
  if [ $m = unset ]; then run weft-$m-$rep env LD_PRELOAD=$PWD/.gpu/libweft_nccl.so WEFT_NCCL_FALLBACK=0 WEFT_DEBUG=WARN $CB
  else run weft-$m-$rep env LD_PRELOAD=$PWD/.gpu/libweft_nccl.so WEFT_NCCL_FALLBACK=0 WEFT_DEBUG=WARN WEFT_MAX_CTAS=$m $CB; fi
done
done
run nccl2 env -u LD_PRELOAD NCCL_DEBUG=WARN $CB
tar -czf $OUT/ctas.tgz -C $OUT ctas && rm -rf $OUT/ctas
