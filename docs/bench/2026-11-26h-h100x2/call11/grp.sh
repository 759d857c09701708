set -u
tar -xzf .gpuz/bundle.tgz
R=$PWD
CB=examples/cbench/cbench
make -C examples/cbench CFLAGS='-O2 -Wall' >/dev/null 2>&1 || gcc -O2 -I/usr/local/cuda/include -o $CB examples/cbench/cbench.c -L/usr/local/cuda/lib64 -Wl,-rpath,/usr/local/cuda/lib64 -l:libnccl.so.2 -lcudart -ldl -lm
mkdir -p $OUT/grp
A=(-g 2 -t sendrecv,gather,allgather -b 8 -e 4K -f 8 -w 5 -n 500 -G 0 -H 1 -c 0)
W="env WEFT_NCCL_FALLBACK=0 WEFT_DEBUG=WARN LD_PRELOAD=$R/.gpu/libweft_nccl.so"
run() { name=$1; shift; echo "== $name"; timeout 60 "$@" >$OUT/grp/$name.log 2>&1; echo "rc=$? $(tail -1 $OUT/grp/$name.log)"; }
run nccl env -u LD_PRELOAD NCCL_DEBUG=WARN $CB "${A[@]}"
run weft $W $CB "${A[@]}"
run weft-prof $W WEFT_PROXY_PROFILE=1 $CB "${A[@]}"
run weft-cgocheck0 $W GODEBUG=cgocheck=0 $CB "${A[@]}"
run weft-sendrecv-prof $W WEFT_PROXY_PROFILE=1 $CB -g 2 -t sendrecv -b 8 -e 8 -w 5 -n 2000 -G 0 -H 1 -c 0
run weft-gather-prof $W WEFT_PROXY_PROFILE=1 $CB -g 2 -t gather -b 8 -e 8 -w 5 -n 2000 -G 0 -H 1 -c 0
tar -czf $OUT/grp.tgz -C $OUT grp && rm -rf $OUT/grp
