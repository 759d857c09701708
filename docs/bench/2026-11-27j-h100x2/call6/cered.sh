#!/usr/bin/env bash
# Call 6 (2026-11-27, 2×H100): where the 2-rank copy-engine Reduce should start. Call 5 found
# Reduce 96 MB at 0.86× NCCL (the copy-engine Reduce, default from 64 MiB) between 48 MB (SM
# plan, 1.01) and 192 MB (1.02). cbench Reduce, float, root 0, CUDA graphs, 48/96/192/384 MB and
# 64/128/256 MB; NCCL, weft (default), weft with the copy-engine Reduce from 128 MiB and from
# 512 MiB (SM plans below), alternated twice. Run after `make gpu-bundle-four`.
set -u
tar -xzf .gpuz/bundle.tgz
export NCCL_NVLS_ENABLE=0; unset WEFT_NVLS
CB=examples/cbench/cbench
[ -x $CB ] || make -C examples/cbench CFLAGS='-O2 -Wall' >/dev/null 2>&1
W=(env LD_PRELOAD=$PWD/.gpu/libweft_nccl.so WEFT_NCCL_FALLBACK=0 WEFT_DEBUG=WARN)
N=(env -u LD_PRELOAD NCCL_DEBUG=WARN)
for i in 1 2; do
  for r in "48M 384M" "64M 256M"; do
    set -- $r
    A=(-g 2 -t reduce -d float -b $1 -e $2 -f 2 -w 3 -n 10 -G 5 -c 1 -p 0)
    "${N[@]}" $CB "${A[@]}" >"$OUT/nccl-$1-$i.log" 2>&1
    "${W[@]}" $CB "${A[@]}" >"$OUT/weft-$1-$i.log" 2>&1
    "${W[@]}" WEFT_CE_REDUCE_MIN_BYTES=128M $CB "${A[@]}" >"$OUT/ce128-$1-$i.log" 2>&1
    "${W[@]}" WEFT_CE_REDUCE_MIN_BYTES=512M $CB "${A[@]}" >"$OUT/ce512-$1-$i.log" 2>&1
  done
done
for r in 48M 64M; do
  for i in 1 2; do python3 scripts/cbench-ratios.py "$OUT/nccl-$r-$i.log" "$OUT"/weft-$r-?.log "$OUT"/ce128-$r-?.log "$OUT"/ce512-$r-?.log; done
done | tee "$OUT/ratios.txt"
grep -h "wrong elements in all" "$OUT"/*.log | sort | uniq -c
