set -u
tar -xzf .gpuz/bundle.tgz
R=$PWD
mkdir -p $OUT/ucxhw
( cd /tmp && WEFT_TEST_HAL=nvlink WEFT_REQUIRE=nvlink,ucx timeout 150 $R/.gpu/weft.test -test.run 'TestCollectivesAcrossNodesUCX/tcp/2x1' -test.count=1 -test.v 2>&1 | tail -15 ) > $OUT/ucxhw/across.log 2>&1
tail -4 $OUT/ucxhw/across.log
NETS="ucx socket" COLLS="all_gather broadcast all_reduce" MAXB=16M FACTOR=64 BUDGET=220 bash scripts/gpu-net.sh > $OUT/ucxhw/net.log 2>&1
tail -12 $OUT/ucxhw/net.log
cp $OUT/*.json $OUT/ucxhw/ 2>/dev/null; rm -f $OUT/*.json
tar -czf $OUT/ucxhw.tgz -C $OUT ucxhw && rm -rf $OUT/ucxhw
