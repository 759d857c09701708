set -u
tar -xzf .gpuz/bundle.tgz
export NCCL_NVLS_ENABLE=0; unset WEFT_NVLS
PARTS="tests cbench host" BUDGET=560 bash .gpu/gpu-accept.sh > $OUT/accept.txt 2>&1
echo "accept rc=$?"; grep -A45 "== gpu-accept" $OUT/accept.txt | head -50
echo "shm: $(ls /dev/shm | grep -ci weft)"
