set -u
tar -xzf .gpuz/bundle.tgz
export NCCL_NVLS_ENABLE=0; unset WEFT_NVLS
R=$PWD
mkdir -p $OUT/u
for i in 1 2; do
  cp .gpuz/bundle-weft .gpu/weft 2>/dev/null
  NETS="ucx" COLLS="all_gather all_reduce sendrecv" MAXB=4K FACTOR=64 BUDGET=80 bash scripts/gpu-net.sh > $OUT/u/base-$i.log 2>&1
  mkdir -p $OUT/u/base-$i && mv $OUT/*.json $OUT/u/base-$i/ 2>/dev/null
  cp .gpu/weft .gpuz/bundle-weft
  cp .gpuz/alt/weft .gpu/weft
  NETS="ucx" COLLS="all_gather all_reduce sendrecv" MAXB=4K FACTOR=64 BUDGET=80 bash scripts/gpu-net.sh > $OUT/u/spin-$i.log 2>&1
  mkdir -p $OUT/u/spin-$i && mv $OUT/*.json $OUT/u/spin-$i/ 2>/dev/null
  cp .gpuz/bundle-weft .gpu/weft
done
tar -czf $OUT/u.tgz -C $OUT u && rm -rf $OUT/u
