set -u
tar -xzf .gpuz/bundle.tgz
R=$PWD
CB=examples/cbench/cbench
make -C examples/cbench CFLAGS='-O2 -Wall' >/dev/null 2>&1 || gcc -O2 -I/usr/local/cuda/include -o $CB examples/cbench/cbench.c -L/usr/local/cuda/lib64 -Wl,-rpath,/usr/local/cuda/lib64 -l:libnccl.so.2 -lcudart -ldl -lm
mkdir -p $OUT/eager
A=(-g 2 -t sendrecv,allgather,broadcast -b 8 -e 32K -f 8 -w 5 -n 200 -G 0 -H 1 -c 0)
W="env WEFT_NCCL_FALLBACK=0 WEFT_DEBUG=WARN LD_PRELOAD=$R/.gpu/libweft_nccl.so"
run() { name=$1; shift; echo "== $name"; timeout 60 "$@" >$OUT/eager/$name.log 2>&1; echo "rc=$? $(grep -c . $OUT/eager/$name.log) lines"; }
{ which perf strace ltrace gdb py-spy; nproc; cat /proc/cpuinfo | grep "model name" | head -1; } > $OUT/eager/tools.txt 2>&1
run nccl env -u LD_PRELOAD NCCL_DEBUG=WARN $CB "${A[@]}"
run weft $W $CB "${A[@]}"
run weft-prof $W WEFT_PROXY_PROFILE=1 $CB "${A[@]}"
run weft-gcoff $W GOGC=off $CB "${A[@]}"
run weft-gctrace $W GODEBUG=gctrace=1 $CB "${A[@]}"
run weft-maxprocs2 $W GOMAXPROCS=2 $CB "${A[@]}"
if command -v strace >/dev/null; then
  run weft-strace strace -f -c -o $OUT/eager/strace-weft.txt env WEFT_NCCL_FALLBACK=0 LD_PRELOAD=$R/.gpu/libweft_nccl.so $CB -g 2 -t sendrecv -b 8 -e 8 -w 5 -n 2000 -G 0 -c 0
  run nccl-strace strace -f -c -o $OUT/eager/strace-nccl.txt $CB -g 2 -t sendrecv -b 8 -e 8 -w 5 -n 2000 -G 0 -c 0
fi
if command -v perf >/dev/null; then
  run weft-perf perf record -F 2000 -g -o $OUT/eager/perf.data env WEFT_NCCL_FALLBACK=0 LD_PRELOAD=$R/.gpu/libweft_nccl.so $CB -g 2 -t sendrecv -b 8 -e 8 -w 5 -n 20000 -G 0 -c 0
  perf report -i $OUT/eager/perf.data --stdio --no-children 2>/dev/null | head -150 > $OUT/eager/perf-report.txt
  rm -f $OUT/eager/perf.data
fi
tar -czf $OUT/eager.tgz -C $OUT eager && rm -rf $OUT/eager
