tar -xzf .gpuz/bundle.tgz
export NCCL_NVLS_ENABLE=0; unset WEFT_NVLS
export WEFT_REQUIRE=nvlink
mkdir -p $OUT/t
timeout 150 .gpu/weft.test -test.run 'TestP2PNVLink|TestP2PRegisteredNVLink|TestP2PRegisteredGraphNVLink' -test.count 1 -test.v > $OUT/t/p2p-tests.log 2>&1
echo "gpu tests rc=$? $(grep -c -- '--- PASS' $OUT/t/p2p-tests.log) passed; $(grep -E -- '--- (FAIL|SKIP)' $OUT/t/p2p-tests.log | head -5)"
STEPS=ab AB_COLLS=gather,scatter,sendrecv BUDGET=200 bash scripts/gpu-probe.sh 2>&1 | tail -7
CB=examples/cbench/cbench
RA=(-g 2 -t gather,scatter,sendrecv -d float -b 1M -e 64M -f 2 -w 5 -n 20 -G 10 -c 1 -p 0 -R 1)
env -u LD_PRELOAD NCCL_DEBUG=WARN timeout 60 $CB "${RA[@]}" > $OUT/reg-nccl.log 2>&1; echo "reg nccl rc=$?"
for lib in new:.gpu/libweft_nccl.so base:.gpuz/old/libweft_nccl.so; do
  env LD_PRELOAD="$PWD/${lib#*:}" WEFT_NCCL_FALLBACK=0 WEFT_DEBUG=WARN timeout 60 $CB "${RA[@]}" > $OUT/reg-${lib%%:*}.log 2>&1
  echo "reg ${lib%%:*} rc=$? $(grep -h 'wrong elements' $OUT/reg-${lib%%:*}.log)"
done
ls /dev/shm | grep -ci weft
