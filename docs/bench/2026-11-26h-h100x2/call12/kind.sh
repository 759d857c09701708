set -u
tar -xzf .gpuz/bundle.tgz
R=$PWD
CB=examples/cbench/cbench
make -C examples/cbench CFLAGS='-O2 -Wall' >/dev/null 2>&1 || gcc -O2 -I/usr/local/cuda/include -o $CB examples/cbench/cbench.c -L/usr/local/cuda/lib64 -Wl,-rpath,/usr/local/cuda/lib64 -l:libnccl.so.2 -lcudart -ldl -lm
mkdir -p $OUT/kind
A=(-g 2 -t allreduce,allgather,reducescatter,broadcast,reduce -b 8 -e 4K -f 8 -w 5 -n 500 -G 0 -H 1 -c 0)
W="env WEFT_NCCL_FALLBACK=0 WEFT_DEBUG=WARN LD_PRELOAD=$R/.gpu/libweft_nccl.so"
run() { name=$1; shift; echo "== $name"; timeout 60 "$@" >$OUT/kind/$name.log 2>&1; echo "rc=$? $(tail -1 $OUT/kind/$name.log)"; }
run nccl env -u LD_PRELOAD NCCL_DEBUG=WARN $CB "${A[@]}"
run weft $W $CB "${A[@]}"
run weft-prof $W WEFT_PROXY_PROFILE=1 $CB "${A[@]}"
tar -czf $OUT/kind.tgz -C $OUT kind && rm -rf $OUT/kind
