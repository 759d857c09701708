#!/usr/bin/env bash
# Call 8 (2026-11-27, 2×H100): the 2-rank Reduce at 12 MB (0.95–0.97× NCCL in calls 5–7: the
# windowed ReduceHB, 128 × 512, windows of 16 MiB, pipeline 4) in other WEFT_ROOTED_SHAPEs, at 8 /
# 12 / 16 / 24 MB, NCCL before and after. After `make gpu-bundle-four`.
set -u
tar -xzf .gpuz/bundle.tgz
export NCCL_NVLS_ENABLE=0; unset WEFT_NVLS
CB=examples/cbench/cbench
[ -x $CB ] || make -C examples/cbench CFLAGS='-O2 -Wall' >/dev/null 2>&1
run() { # name env...
  local n=$1; shift
  for r in "8M 16M" "12M 24M"; do
    set -- "$@"; local b=${r% *} e=${r#* }
    env "$@" $CB -g 2 -t reduce -d float -b $b -e $e -f 2 -w 3 -n 10 -G 5 -c 1 -p 0 >"$OUT/$n-$b.log" 2>&1
  done
}
W=(LD_PRELOAD=$PWD/.gpu/libweft_nccl.so WEFT_NCCL_FALLBACK=0 WEFT_DEBUG=WARN)
run nccl1 -u LD_PRELOAD
run default "${W[@]}"
for s in 128x512w16Mp8 128x512w16Mp2 128x512w4M 128x512w8Md4 64x1024 128x1024 132x512w16Mp8; do run "s$s" "${W[@]}" WEFT_ROOTED_SHAPE=$s; done
run nccl2 -u LD_PRELOAD
for b in 8M 12M; do python3 scripts/cbench-ratios.py "$OUT/nccl1-$b.log" "$OUT"/default-$b.log "$OUT"/s*-$b.log; python3 scripts/cbench-ratios.py "$OUT/nccl2-$b.log" "$OUT"/default-$b.log; done | tee "$OUT/ratios.txt"
grep -h "wrong elements in all" "$OUT"/*.log | sort | uniq -c
