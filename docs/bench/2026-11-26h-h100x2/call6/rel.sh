set -u
tar -xzf .gpuz/bundle.tgz
R=$PWD
CB=examples/cbench/cbench
make -C examples/cbench CFLAGS='-O2 -Wall' >/dev/null 2>&1 || gcc -O2 -I/usr/local/cuda/include -o $CB examples/cbench/cbench.c -L/usr/local/cuda/lib64 -Wl,-rpath,/usr/local/cuda/lib64 -l:libnccl.so.2 -lcudart -ldl -lm
A=(-g 2 -t broadcast,reduce,sendrecv,gather,scatter,allreduce -b 8 -e 1M -f 4 -w 5 -n 20 -G 10 -c 1)
mkdir -p $OUT/rel
run() { name=$1; shift; echo "== $name"; timeout 90 "$@" >$OUT/rel/$name.log 2>&1; echo "rc=$? $(tail -1 $OUT/rel/$name.log)"; }
W="env WEFT_NCCL_FALLBACK=0 WEFT_DEBUG=WARN"
run nccl1 env -u LD_PRELOAD NCCL_DEBUG=WARN $CB "${A[@]}" -p 0
for rep in 1 2; do
  run new-$rep $W LD_PRELOAD=$R/.gpu/libweft_nccl.so $CB "${A[@]}" -p 0
  run old-$rep $W LD_PRELOAD=$R/.gpuz/old/libweft_nccl.so $CB "${A[@]}" -p 0
done
run nccl2 env -u LD_PRELOAD NCCL_DEBUG=WARN $CB "${A[@]}" -p 0
run new-bf16-inplace $W LD_PRELOAD=$R/.gpu/libweft_nccl.so $CB "${A[@]}" -d bfloat16 -p 1
run new-eager $W LD_PRELOAD=$R/.gpu/libweft_nccl.so $CB "${A[@]}" -G 0 -p 0
run new-eager-all $W LD_PRELOAD=$R/.gpu/libweft_nccl.so $CB -g 2 -b 8 -e 4M -f 4 -w 5 -n 20 -G 0 -c 1 -p 1
run new-eager-bf16 $W LD_PRELOAD=$R/.gpu/libweft_nccl.so $CB -g 2 -b 8 -e 4M -f 4 -w 5 -n 20 -G 0 -c 1 -p 0 -d bfloat16
run nccl-eager env -u LD_PRELOAD NCCL_DEBUG=WARN $CB -g 2 -b 8 -e 4M -f 4 -w 5 -n 20 -G 0 -c 1 -p 1
(cd /tmp && WEFT_REQUIRE=nvlink timeout 120 $R/.gpu/weft.test -test.run 'TestP2PNVLink|TestP2PRegisteredNVLink|TestP2PRegisteredGraphNVLink' -test.count=1 -test.v 2>&1 | grep -E "^(---|PASS|FAIL|ok)|panic" | head) | tee $OUT/rel/tests.log
tar -czf $OUT/rel.tgz -C $OUT rel && rm -rf $OUT/rel
