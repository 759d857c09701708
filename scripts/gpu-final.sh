#!/usr/bin/env bash
# One device call on a 2-GPU host for what is left of issues 18, 19 and 20 after
# scripts/gpu-harden.sh: the rest of the hardening checks, the GPU tests that show the
# redesign changed no behaviour, and every collective beside NCCL 2.28.3 through the C ABI
# (examples/cbench under LD_PRELOAD) and through weft bench, with plots. Run from the
# repository root after `make gpu-bundle-final` here. Time-boxed steps; the whole run stays
# under BUDGET seconds (default 550).
#
# Files back in $OUT: summary.txt, logs.tar.gz, cbench.log, bench.log, bench-json.tar.gz, *.svg.
# Knobs: STEPS="harden tests cbench bench"  BUDGET=550  MAXB=1G  BENCH_COLLS="all_reduce all_gather sendrecv"
set -u
# shellcheck source=scripts/steps.sh
source "$(dirname "$0")/steps.sh"
BUDGET=${BUDGET:-550}
STEPS=${STEPS:-"harden tests cbench bench"}
MAXB=${MAXB:-1G}
BENCH_COLLS=${BENCH_COLLS:-"all_reduce all_gather sendrecv"}
LIB=$B/libweft_nccl.so

# steps.sh keeps NVLink multicast off (NCCL_NVLS_ENABLE=0, WEFT_NVLS unset).
export WEFT_REQUIRE=${WEFT_REQUIRE:-nvlink}
NP=${NP:-2}
WEFT_ENV=(env LD_PRELOAD="$LIB" WEFT_NCCL_FALLBACK=0 WEFT_DEBUG=WARN)
REF_ENV=(env -u LD_PRELOAD NCCL_DEBUG=WARN)
CB=examples/cbench/cbench
{ date -u; hostname; nvidia-smi -L; nvidia-smi topo -m; ls -la "$B"; } >"$L/machine.txt" 2>&1
cat "$L/machine.txt"
shm_before=$(ls /dev/shm | grep -c weft)
wrong() { grep -E "wrong elements in all" $log | tail -n 1; }
pass() { grep -E "^(ok|PASS|FAIL|--- FAIL)" $log | tail -n 3; }
step cbench-build 60 'ls -la $CB | cut -c1-80' -- bash -c "make -C examples/cbench CFLAGS='-O2 -Wall' >/dev/null || \
  gcc -O2 -I/usr/local/cuda/include -o $CB $CB.c -L/usr/local/cuda/lib64 -Wl,-rpath,/usr/local/cuda/lib64 -l:libnccl.so.2 -lcudart -ldl -lm"

# ---- issue 18: what gpu-harden.sh's first run did not reach
if want harden; then
  MPI=(mpirun --allow-run-as-root --oversubscribe -np "$NP" -x LD_PRELOAD="$LIB" -x WEFT_NCCL_FALLBACK=0 -x NCCL_NVLS_ENABLE=0)
  step mpirun-premul 40 'wrong' -- "${MPI[@]}" $CB -t allreduce,reducescatter,reduce -o premulsum -S device -d float -b 8 -e 16M -f 8 -w 1 -n 2 -c 1
  step mpirun-a2a 40 'wrong' -- "${MPI[@]}" $CB -t alltoall -d half -b 8 -e 16M -f 8 -w 1 -n 2 -c 1 -p 1
  step premul-weft 60 'wrong' -- "${WEFT_ENV[@]}" $CB -g "$NP" -t allreduce,reducescatter,reduce -o premulsum -S host -d all -b 8 -e 2M -f 8 -w 1 -n 2 -G 0 -c 1
  step a2a-weft 60 'wrong' -- "${WEFT_ENV[@]}" $CB -g "$NP" -t alltoall -d all -b 8 -e 16M -f 8 -w 1 -n 2 -G 0 -c 1 -p 1
  step bench-premul 45 'grep -E "^# (Out of bounds|Avg bus)" $log' -- \
    "$B/weft" bench all_reduce --raw -o premulsum -d bfloat16 -b 8 -e 64M -f 8 -G 20 -c 1 --baseline nccl --nproc "$NP"
  step fit-device 20 'grep -iE "free|need" $log | head -n 1' -- bash -c \
    "'$B/weft' bench all_reduce --nproc $NP -b 200G -e 200G; rc=\$?; echo exit \$rc; [ \$rc -ne 0 ] && [ \$rc -ne 124 ]"
fi

# ---- issue 19: behaviour unchanged (GPU tests of the device cores, the backends, in-place AlltoAll)
if want tests; then
  step test-cudadev 60 'pass' -- "$B/internal_cudadev.test" -test.count=1 -test.v
  step test-nvlink 60 'pass' -- "$B/hal_nvlink.test" -test.count=1 -test.v
  step test-nvswitch 60 'pass' -- "$B/hal_nvswitch.test" -test.count=1 -test.v
  step test-inplace 60 'pass' -- "$B/weft.test" -test.count=1 -test.v -test.run 'TestInPlaceAllToAllNVLink|TestP2PNVLink'
fi

# ---- issue 20: every collective through the C ABI beside NCCL, float, CUDA graphs, 8 B to MAXB
CBA=(-g "$NP" -b 8 -e "$MAXB" -f 4 -w 3 -n 10 -G 10 -c 1 -p 0)
if want cbench; then
  step cbench-weft 120 'wrong' -- "${WEFT_ENV[@]}" $CB "${CBA[@]}"
  step cbench-nccl 120 'wrong' -- "${REF_ENV[@]}" $CB "${CBA[@]}"
  cat "$L/cbench-nccl.log" "$L/cbench-weft.log" >"$OUT/cbench.log" 2>/dev/null
fi

# ---- issue 20: weft bench beside NCCL, with plots
if want bench; then
  for c in $BENCH_COLLS; do
    step "bench-$c" 60 'grep -E "^# (Out of bounds|Avg bus)" $log' -- \
      "$B/weft" bench "$c" -b 8 -e "$MAXB" -f 4 -G 20 -c 1 --baseline nccl --nproc "$NP" -J "$L/bench-$c.json" --plot "$OUT/bench-$c.svg"
  done
  for c in $BENCH_COLLS; do [ -f "$L/bench-$c.log" ] && cat "$L/bench-$c.log"; done >"$OUT/bench.log"
  tar -C "$L" -czf "$OUT/bench-json.tar.gz" $(cd "$L" && ls bench-*.json 2>/dev/null) 2>/dev/null
fi

step shm-clean 10 'tail -n 1 $log' -- bash -c "n=\$(ls /dev/shm | grep -c weft); echo \"weft files in /dev/shm: before $shm_before, after \$n\"; [ \$n -le $shm_before ]"
save
{
  echo "== gpu-final: $NP GPUs, $(( $(date +%s) - T0 ))s, MAXB=$MAXB"
  printf '%-20s %-7s %5s  %s\n' step result secs note
  printf '%s\n' "${rows[@]}"
  echo "== $nbad step(s) failed, timed out or skipped"
} | tee "$OUT/summary.txt"
[ "$nbad" -eq 0 ]
