#!/usr/bin/env bash
# Call 5b (on call 5's warm machine): Reduce and gather at 6–192 MB by 2, NCCL and weft alternated
# twice, to check call 5's single-run dips (reduce 12 / 96 MB, gather 48 MB).
cd /work/main; CB=examples/cbench/cbench; A="-g 2 -t reduce,gather -d float -b 6M -e 192M -f 2 -w 3 -n 10 -G 5 -c 1 -p 0"
for i in 1 2; do env -u LD_PRELOAD NCCL_DEBUG=WARN NCCL_NVLS_ENABLE=0 $CB $A > $OUT/nccl$i.log 2>&1; LD_PRELOAD=$PWD/.gpu/libweft_nccl.so WEFT_NCCL_FALLBACK=0 WEFT_DEBUG=WARN NCCL_NVLS_ENABLE=0 $CB $A > $OUT/weft$i.log 2>&1; done
python3 scripts/cbench-ratios.py $OUT/nccl1.log $OUT/weft1.log $OUT/weft2.log; python3 scripts/cbench-ratios.py $OUT/nccl2.log $OUT/weft1.log $OUT/weft2.log
