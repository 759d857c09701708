set -u
tar -xzf .gpuz/bundle.tgz
export NCCL_NVLS_ENABLE=0; unset WEFT_NVLS
R=$PWD
mkdir -p $OUT/u
( cd /tmp && WEFT_TEST_HAL=nvlink WEFT_REQUIRE=nvlink,ucx timeout 120 $R/.gpu/weft.test -test.run 'TestCollectivesAcrossNodesUCX/tcp/2x1' -test.count=1 -test.v 2>&1 | tail -8 ) > $OUT/u/across.log 2>&1
tail -3 $OUT/u/across.log
NETS="ucx socket" COLLS="all_gather broadcast all_reduce sendrecv" MAXB=256K FACTOR=64 BUDGET=170 bash scripts/gpu-net.sh > $OUT/u/net-new.log 2>&1
tail -14 $OUT/u/net-new.log
mkdir -p $OUT/u/new && mv $OUT/*.json $OUT/u/new/ 2>/dev/null; cp $OUT/*.log $OUT/u/new/ 2>/dev/null
cp .gpuz/old/weft .gpu/weft
NETS="ucx" COLLS="all_gather broadcast all_reduce sendrecv" MAXB=256K FACTOR=64 BUDGET=100 bash scripts/gpu-net.sh > $OUT/u/net-old.log 2>&1
tail -8 $OUT/u/net-old.log
mkdir -p $OUT/u/old && mv $OUT/*.json $OUT/u/old/ 2>/dev/null
tar -czf $OUT/u.tgz -C $OUT u && rm -rf $OUT/u
ls $OUT
