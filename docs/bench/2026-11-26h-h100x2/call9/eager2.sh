set -u
tar -xzf .gpuz/bundle.tgz
R=$PWD
CB=examples/cbench/cbench
make -C examples/cbench CFLAGS='-O2 -Wall' >/dev/null 2>&1 || gcc -O2 -I/usr/local/cuda/include -o $CB examples/cbench/cbench.c -L/usr/local/cuda/lib64 -Wl,-rpath,/usr/local/cuda/lib64 -l:libnccl.so.2 -lcudart -ldl -lm
mkdir -p $OUT/eager2
A=(-g 2 -t allreduce,allgather,broadcast,reduce,sendrecv,gather -b 8 -e 32K -f 8 -w 5 -n 200 -G 0 -H 1 -c 0)
W="env WEFT_NCCL_FALLBACK=0 WEFT_DEBUG=WARN LD_PRELOAD=$R/.gpu/libweft_nccl.so"
run() { name=$1; shift; echo "== $name"; timeout 60 "$@" >$OUT/eager2/$name.log 2>&1; echo "rc=$? $(tail -1 $OUT/eager2/$name.log)"; }
rss() { ( sleep 4; for p in $(pgrep -f examples/cbench/cbench); do grep -H VmRSS /proc/$p/status; done ) > $OUT/eager2/rss-$1.txt 2>&1 & }
run nccl1 env -u LD_PRELOAD NCCL_DEBUG=WARN $CB "${A[@]}"
for rep in 1 2; do
  rss floor-$rep; run floor-$rep $W $CB "${A[@]}"
  rss nofloor-$rep; run nofloor-$rep $W WEFT_HEAP_FLOOR=0 $CB "${A[@]}"
  run gcoff-$rep $W GOGC=off $CB "${A[@]}"
done
run nccl2 env -u LD_PRELOAD NCCL_DEBUG=WARN $CB "${A[@]}"
run floor-gctrace $W GODEBUG=gctrace=1 $CB "${A[@]}"
run nofloor-gctrace $W WEFT_HEAP_FLOOR=0 GODEBUG=gctrace=1 $CB "${A[@]}"
tar -czf $OUT/eager2.tgz -C $OUT eager2 && rm -rf $OUT/eager2
