tar -xzf .gpuz/bundle.tgz
export NCCL_NVLS_ENABLE=0; unset WEFT_NVLS
export WEFT_REQUIRE=nvlink
STEPS=p2pwin P2PWIN_MAXB=64M P2PWIN_SHAPES="default 8x1024w1M 16x1024w1M 16x1024w2M 16x1024w4M 24x1024w2M 32x1024w2M 32x1024w4M 16x512w1M 24x1024w4M default" BUDGET=300 bash scripts/gpu-probe.sh
