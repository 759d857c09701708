set -u
tar -xzf .gpuz/bundle.tgz
export NCCL_NVLS_ENABLE=0; unset WEFT_NVLS
R=$PWD
PARTS="tests cbench host" BUDGET=500 bash .gpu/gpu-accept.sh > $OUT/accept.txt 2>&1
echo "accept rc=$?"; grep -A40 "== summary ==" $OUT/accept.txt | head -45
CB=examples/cbench/cbench
[ -x $CB ] || make -C examples/cbench CFLAGS='-O2 -Wall' >/dev/null 2>&1
mkdir -p $OUT/eager
A=(-g 2 -t sendrecv,gather,scatter -b 8 -e 4K -f 8 -w 5 -n 500 -G 0 -H 1 -c 0)
run() { name=$1; shift; timeout 60 "$@" >$OUT/eager/$name.log 2>&1; echo "$name rc=$? $(tail -1 $OUT/eager/$name.log)"; }
run nccl env -u LD_PRELOAD NCCL_DEBUG=WARN $CB "${A[@]}"
for i in 1 2; do
  run new-$i env WEFT_NCCL_FALLBACK=0 WEFT_DEBUG=WARN LD_PRELOAD=$R/.gpu/libweft_nccl.so $CB "${A[@]}"
  run old-$i env WEFT_NCCL_FALLBACK=0 WEFT_DEBUG=WARN LD_PRELOAD=$R/.gpuz/old/libweft_nccl.so $CB "${A[@]}"
done
ls /dev/shm | grep -ci weft
