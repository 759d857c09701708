#!/usr/bin/env bash
# Calls 7b and 7c (call 7's warm machine): odd numbers of 32 MiB windows past 256 MB (out/odd/), and
# the sizes between powers of four again (1.5 MB × 2^k, out/between/), old and new beside NCCL.
CB=examples/cbench/cbench; export NCCL_NVLS_ENABLE=0
for s in 288M 352M 416M 480M; do A=(-g 2 -t reduce -d float -b $s -e $s -f 2 -w 3 -n 10 -G 5 -c 1 -p 0); env -u LD_PRELOAD $CB "${A[@]}" > $OUT/nccl-$s.log 2>&1; WEFT_NCCL_FALLBACK=0 LD_PRELOAD=$PWD/.gpuz/old.so $CB "${A[@]}" > $OUT/old-$s.log 2>&1; WEFT_NCCL_FALLBACK=0 LD_PRELOAD=$PWD/.gpu/libweft_nccl.so $CB "${A[@]}" > $OUT/new-$s.log 2>&1; python3 scripts/cbench-ratios.py $OUT/nccl-$s.log $OUT/old-$s.log $OUT/new-$s.log; done
A=(-g 2 -t reduce -d float -b 1536K -e 768M -f 2 -w 3 -n 10 -G 5 -c 1 -p 0); env -u LD_PRELOAD $CB "${A[@]}" > $OUT/nccl.log 2>&1; WEFT_NCCL_FALLBACK=0 LD_PRELOAD=$PWD/.gpu/libweft_nccl.so $CB "${A[@]}" > $OUT/new.log 2>&1; WEFT_NCCL_FALLBACK=0 LD_PRELOAD=$PWD/.gpuz/old.so $CB "${A[@]}" > $OUT/old.log 2>&1; python3 scripts/cbench-ratios.py $OUT/nccl.log $OUT/old.log $OUT/new.log
