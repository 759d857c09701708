#!/usr/bin/env bash
# Call 1 (2026-11-27, twenty-first session, 4×H100 `nvidia-h100-x4`): the per-link LL128 verdict
# (native P2P atomics) and warp_sync on the GPUs — the "communicator ready" line's wide_ll on 2 and
# 4 ranks, cbench 256 KB – 16 MB beside NCCL (compare 2026-11-27f call 3 / call 6) — and the
# doorbell probe: a port put-with-signal queued on the engine's stream before the kernel rings for
# it (BenchmarkDoorbellPut) beside the proxy's (BenchmarkPortLatency, BenchmarkCopyEngineLatency).
set -u
T0=$(date +%s)
tar -xzf .gpuz/bundle.tgz
export NCCL_NVLS_ENABLE=0; unset WEFT_NVLS
export WEFT_REQUIRE=nvlink
B=.gpu; CB=examples/cbench/cbench
W=(env LD_PRELOAD=$PWD/$B/libweft_nccl.so WEFT_NCCL_FALLBACK=0 WEFT_DEBUG=WARN)
R=(env -u LD_PRELOAD NCCL_DEBUG=WARN)
mkdir -p "$OUT/logs"
el() { echo "== $(( $(date +%s) - T0 )) s: $*"; }
run() { local n=$1; shift; timeout 90 "$@" >"$OUT/logs/$n.log" 2>&1; echo "$n rc=$? $(grep -c ' 0 wrong' "$OUT/logs/$n.log") ok lines"; }
{
make -B -C examples/cbench CFLAGS='-O2 -Wall' >/dev/null 2>&1 || make -B -C examples/cbench CFLAGS='-O2 -Wall' OMP= >/dev/null
el "verdict"
for g in 2 4; do
  timeout 60 env LD_PRELOAD=$PWD/$B/libweft_nccl.so WEFT_NCCL_FALLBACK=0 WEFT_DEBUG=INFO $CB -g $g -t allreduce -d float -b 1M -e 1M -w 1 -n 1 -G 0 -c 1 -p 0 2>&1 | grep -o "communicator ready.*" | head -2
done
S=(-t allreduce,broadcast,reduce,allgather,reducescatter -d float -b 256K -e 16M -f 2 -w 5 -n 20 -G 10 -c 1 -p 0)
el "4 ranks"
run n4-nccl "${R[@]}" $CB -g 4 "${S[@]}"
run n4-weft "${W[@]}" $CB -g 4 "${S[@]}"
el "2 ranks"
run n2-nccl "${R[@]}" $CB -g 2 "${S[@]}"
run n2-weft "${W[@]}" $CB -g 2 "${S[@]}"
run n2-inplace "${W[@]}" $CB -g 2 -t allreduce,broadcast,reduce -d bfloat16 -r 1 -b 256K -e 16M -f 4 -w 2 -n 5 -G 5 -c 1 -p 1
el ratios
python3 scripts/cbench-ratios.py "$OUT/logs/n4-nccl.log" "$OUT/logs/n4-weft.log"
python3 scripts/cbench-ratios.py "$OUT/logs/n2-nccl.log" "$OUT/logs/n2-weft.log"
grep -H "wrong elements" "$OUT"/logs/*.log | grep -v " 0 wrong"
grep -H -i "error\|fail\|timeout" "$OUT"/logs/*.log | head -20
el "doorbell probe"
CUDA_VISIBLE_DEVICES=0,1 timeout 120 $B/internal_cudadev.test -test.run '^$' -test.bench 'DoorbellPut|CopyEngineLatency' -test.benchtime 5x 2>&1 | grep -v "^goos\|^goarch\|^pkg\|^cpu"
CUDA_VISIBLE_DEVICES=0,1 timeout 120 env WEFT_BENCH_HAL=nvlink $B/weft.test -test.run '^$' -test.bench PortLatency -test.benchtime 3x 2>&1 | grep -v "^goos\|^goarch\|^pkg\|^cpu"
el done
} >"$OUT/verify.txt" 2>&1
tar -czf "$OUT/logs.tar.gz" -C "$OUT" logs && rm -rf "$OUT/logs"
cat "$OUT/verify.txt"
