#!/usr/bin/env bash
# Call 4 (2026-11-27, 4×H100): call 3's gpu-four.sh had Reduce 8 B – 32 KB at 0.39–0.52× NCCL and
# Broadcast 128 B at 0.78 on 4 ranks, where the twenty-second session's final build was ≥ 1.0. Is it
# this session's build (kernel parameters 24 bytes longer, the inbound semaphore region chosen per
# channel) or an earlier one? The session's first commit (fe2722e, .gpuz/old.so) against this build,
# alternated, with NCCL first, cbench -g 4 Reduce and Broadcast 8 B – 512 KB.
# Run from the repository root after `make gpu-bundle-four` and the old library in .gpuz/old.so.
set -u
tar -xzf .gpuz/bundle.tgz
export NCCL_NVLS_ENABLE=0
unset WEFT_NVLS WEFT_ENGINE_WAITS
make -B -C examples/cbench CFLAGS='-O2 -Wall' >/dev/null 2>&1 || make -B -C examples/cbench CFLAGS='-O2 -Wall' OMP= >/dev/null
CB=examples/cbench/cbench
ARGS=(-g 4 -t reduce,broadcast -d float -b 8 -e 512K -f 4 -w 3 -n 20 -G 10 -c 1 -p 0)
env -u LD_PRELOAD NCCL_DEBUG=WARN timeout 60 $CB "${ARGS[@]}" >"$OUT/nccl.log" 2>&1; echo "== nccl rc $?"
for i in 1 2; do
  for v in old new; do
    lib=$PWD/.gpuz/old.so; [ $v = new ] && lib=$PWD/.gpu/libweft_nccl.so
    env LD_PRELOAD="$lib" WEFT_NCCL_FALLBACK=0 WEFT_DEBUG=WARN timeout 60 $CB "${ARGS[@]}" >"$OUT/$v$i.log" 2>&1; echo "== $v$i rc $?"
  done
done
python3 scripts/cbench-ratios.py "$OUT/nccl.log" "$OUT/old1.log" "$OUT/new1.log" "$OUT/old2.log" "$OUT/new2.log"
grep -h -E "wrong elements in all" "$OUT"/*.log | sort | uniq -c
