set -u
tar -xzf .gpuz/bundle.tgz
export NCCL_NVLS_ENABLE=0; unset WEFT_NVLS
export WEFT_REQUIRE=nvlink
mkdir -p $OUT/sh
for c in reduce broadcast; do
  for sh in default 128x512w16Md4 128x512w8Md8 128x512w16Md4p2 96x1024w16M 128x512w32M default2; do
    v=$sh; case $sh in default*) v=;; esac
    WEFT_ROOTED_SHAPE=$v timeout 60 .gpu/weft bench $c -b 8M -e 512M -f 4 -w 3 -n 10 --baseline nccl --nproc 2 --hal nvlink -c 0 > $OUT/sh/$c-$sh.log 2>&1
    echo "$c $sh rc=$? $(grep -E '^ +(8388608|33554432|134217728|536870912) ' $OUT/sh/$c-$sh.log | awk '{printf "%s:%s ", $1/1048576, $(NF-2)}')"
  done
done
tar -czf $OUT/sh.tgz -C $OUT sh && rm -rf $OUT/sh
WEFT_PROXY_PROFILE=1 NETS="ucx socket" COLLS="all_gather" MAXB=64 FACTOR=2 BUDGET=60 bash scripts/gpu-net.sh > $OUT/uprof.txt 2>&1
grep -E "stage=|one-way" $OUT/uprof.txt | sed 's/.*msg=profile//' | cut -c1-220 | head -70
