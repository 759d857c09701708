tar -xzf .gpuz/bundle.tgz
export NCCL_NVLS_ENABLE=0; unset WEFT_NVLS
export WEFT_REQUIRE=nvlink
mkdir -p $OUT/t
for sh in 44x1024w2Md8,warp 44x1024w64Kd4,pull,warp; do
  WEFT_P2P_SHAPE=$sh timeout 120 .gpu/weft.test -test.run 'TestP2PNVLink|TestP2PRegisteredNVLink|TestP2PRegisteredGraphNVLink' -test.count 1 > "$OUT/t/p2p-$sh.log" 2>&1
  echo "test $sh rc=$? $(tail -1 "$OUT/t/p2p-$sh.log")"
done
STEPS=p2pwin P2PWIN_MAXB=128M P2PWIN_SHAPES="default warp 44x1024w2Md8,warp 44x1024w1Md8,warp 44x1024w4Md4,warp 44x1024w512Kd16,warp 32x1024w2Md8,warp 44x1024w1Md16,warp" BUDGET=300 bash scripts/gpu-probe.sh 2>&1 | tail -12
