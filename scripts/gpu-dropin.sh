#!/usr/bin/env bash
# Issue 7 on a 2-GPU host in one device call: weft's libnccl drop-in under PyTorch and a C
# client, weft bench for every collective beside NCCL, and the soak. Run from the repository
# root after `make gpu-bundle` here (it puts libweft_nccl.so and the weft CLI into .gpu/).
# Every step is time-boxed and the run as a whole stays under BUDGET seconds (default 500):
# a step that would start with too little time left is skipped and marked so. The exit status
# is non-zero if any step failed or was skipped.
#
# Files back in $OUT (at most 8): summary.txt, logs.tar.gz (every log), bench.log (all weft
# bench outputs, for docs/bench/), bench-json.tar.gz, cbench.log.
#
# Knobs:  QUICK=1 (weft bench to 256M and 4 collectives; soak 20000)  BUDGET=500
#         BENCH_COLLS="all_reduce ..."  BENCH_MAX=1G  SOAK_N=100000  STEPS="dropin ddp kill cbench bench soak"
#         DROPIN_ARGS="..." (extra dropin_check.py flags)  WEFT_NCCL_FALLBACK=0 (forwarding off)
set -u
# shellcheck source=scripts/steps.sh
source "$(dirname "$0")/steps.sh"
LIB=$B/libweft_nccl.so
BUDGET=${BUDGET:-500}
STEPS=${STEPS:-"dropin ddp kill cbench bench soak"}

# steps.sh keeps NVLink multicast off (NCCL_NVLS_ENABLE=0, WEFT_NVLS unset).
export WEFT_REQUIRE=${WEFT_REQUIRE:-nvlink} PYTHONUNBUFFERED=1 OMP_NUM_THREADS=4
NGPU=$(nvidia-smi -L 2>/dev/null | wc -l)
NP=${NP:-2}
if [ -n "${QUICK:-}" ]; then
  BENCH_MAX=${BENCH_MAX:-256M}
  BENCH_COLLS=${BENCH_COLLS:-"all_reduce all_gather reduce_scatter alltoall"}
  SOAK_N=${SOAK_N:-20000}
fi
BENCH_MAX=${BENCH_MAX:-1G}
BENCH_COLLS=${BENCH_COLLS:-"all_reduce all_gather reduce_scatter broadcast reduce alltoall sendrecv"}
SOAK_N=${SOAK_N:-100000}
PORT=29700
TORCHRUN="python3 -m torch.distributed.run --nproc-per-node $NP --master-addr 127.0.0.1"


# Command prefixes (timeout cannot run shell functions): weft preloaded with its log on, or the real NCCL.
WEFT_ENV=(env LD_PRELOAD="$LIB" WEFT_DEBUG=INFO NCCL_DEBUG=INFO)
REF_ENV=(env -u LD_PRELOAD NCCL_DEBUG=WARN)

# ---- 0. the machine (needs: nvidia-smi, python3 with torch)
{
  date -u; hostname; nvidia-smi -L; nvidia-smi topo -m
  nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1
  python3 -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version(), "gpus", torch.cuda.device_count())'
  ls -la "$B" 2>&1
  ls -la /usr/lib/x86_64-linux-gnu/libnccl.so* /usr/include/nccl.h 2>&1
} >"$L/machine.txt" 2>&1
cat "$L/machine.txt"
[ -f "$LIB" ] || echo "!! $LIB is missing: run make gpu-bundle on the development machine"
if [ "$NGPU" -lt "$NP" ]; then echo "!! $NGPU GPUs, $NP needed"; fi

# ---- 1. dropin_check.py: every collective PyTorch reaches, eager and in CUDA graphs
# (needs: python3 with torch 2.x, 2 GPUs, .gpu/libweft_nccl.so)
if want dropin; then
  step dropin-weft 170 'grep -E "passed, .* failed" $log' -- \
    "${WEFT_ENV[@]}" $TORCHRUN --master-port $((PORT + 1)) examples/torch/dropin_check.py --dump "$WORK/weft.pt" ${DROPIN_ARGS:-}
  step dropin-nccl 150 'grep -E "passed, .* failed" $log' -- \
    "${REF_ENV[@]}" $TORCHRUN --master-port $((PORT + 2)) examples/torch/dropin_check.py --dump "$WORK/nccl.pt" ${DROPIN_ARGS:-}
  step dropin-compare 60 'tail -n 1 $log' -- python3 examples/torch/dropin_check.py --compare "$WORK/nccl.pt" "$WORK/weft.pt"
  # weft logs "weft: first <kind> served by weft" / "... forwarded to NCCL" per communicator and
  # a served/forwarded count per kind when a communicator is destroyed.
  step dropin-served 10 'cat $L/served-kinds.txt' -- bash -c '
    log='"$L"'/dropin-weft.log
    grep -E "served by weft|forwarded to NCCL|communicator (ready|destroyed|aborted)" "$log" | head -n 60
    grep -oE "first [A-Za-z0-9_]+ served by weft" "$log" | sort -u | awk "{print \$2}" | tr "\n" " " | sed "s/^/served: /" >'"$L"'/served-kinds.txt
    fwd=$(grep -E "first [A-Za-z0-9_]+ forwarded to NCCL|served_by=\"?NCCL" "$log" | sort -u)
    fwd2=$(grep -E "communicator (destroyed|aborted)" "$log" | grep -oE "[a-z_]+=[0-9]+/[1-9][0-9]*" | sort -u)
    echo "forwarded: ${fwd:-none} ${fwd2}" | tee -a '"$L"'/served-kinds.txt
    grep -q "served by weft" "$log" && [ -z "$fwd$fwd2" ]'
fi

# ---- 2. ddp_loss.py: 100 DDP steps, the loss curve under weft and under NCCL
# (needs: python3 with torch, 2 GPUs, .gpu/libweft_nccl.so)
if want ddp; then
  step ddp-weft 90 'tail -n 1 $log' -- "${WEFT_ENV[@]}" $TORCHRUN --master-port $((PORT + 3)) examples/torch/ddp_loss.py --out "$L/ddp-weft.json"
  step ddp-nccl 90 'tail -n 1 $log' -- "${REF_ENV[@]}" $TORCHRUN --master-port $((PORT + 4)) examples/torch/ddp_loss.py --out "$L/ddp-nccl.json"
  step ddp-compare 20 'tail -n 1 $log' -- python3 examples/torch/ddp_loss.py --compare "$L/ddp-nccl.json" "$L/ddp-weft.json" --rtol "${DDP_RTOL:-1e-3}"
fi

# ---- 3. kill_rank.py: SIGKILL rank 1 mid all-reduce; rank 0 must see weft's ncclRemoteError naming it
# (needs: python3 with torch, 2 GPUs, .gpu/libweft_nccl.so; ends by itself within 55 s)
if want kill; then
  step kill-weft 75 'grep -E "^ +0 " $log | cut -c1-110' -- \
    "${WEFT_ENV[@]}" $TORCHRUN --master-port $((PORT + 5)) examples/torch/kill_rank.py --victim 1 --require-rank-name --json "$L/kill-weft.json"
fi

# ---- 4. cbench: an NCCL client in C (-lnccl), with and without the preload
# (needs: gcc or nvcc, /usr/include/nccl.h, libnccl.so(.2), CUDA headers and libcudart)
CB_ARGS=${CB_ARGS:-"-b 8 -e 64M -f 4 -w 5 -n 20 -G 20 -c 1"}
if want cbench; then
  step cbench-build 60 'ls -la examples/cbench/cbench | cut -c1-80' -- bash -c '
    make -C examples/cbench || gcc -O2 -I/usr/local/cuda/include -o examples/cbench/cbench examples/cbench/cbench.c \
      -L/usr/local/cuda/lib64 -Wl,-rpath,/usr/local/cuda/lib64 -l:libnccl.so.2 -lcudart -ldl -lm \
      || /usr/local/cuda/bin/nvcc -O2 -x c -o examples/cbench/cbench examples/cbench/cbench.c -l:libnccl.so.2 -ldl'
  step cbench-nccl 120 'tail -n 1 $log' -- "${REF_ENV[@]}" examples/cbench/cbench -g $NP $CB_ARGS
  step cbench-weft 120 'tail -n 1 $log' -- "${WEFT_ENV[@]}" examples/cbench/cbench -g $NP $CB_ARGS
fi

# ---- 5. weft soak: randomized collectives checked element by element
# (needs: .gpu/weft with the soak command, 2 GPUs)
if want soak; then
  step soak 200 'tail -n 2 $log' -- "$B/weft" soak -n "$SOAK_N" --nproc "$NP"
fi

# ---- 6. weft bench <collective> beside NCCL, every collective
# (needs: .gpu/weft, 2 GPUs, the system's libnccl.so.2 for --baseline nccl)
if want bench; then
  for c in $BENCH_COLLS; do
    step "bench-$c" 100 'grep -E "^# (Out of bounds|Avg bus)" $log' -- \
      "$B/weft" bench "$c" -b 8 -e "$BENCH_MAX" -f 4 -G 20 -c 1 --baseline nccl --nproc "$NP" -J "$L/bench-$c.json"
  done
  for c in $BENCH_COLLS; do [ -f "$L/bench-$c.log" ] && cat "$L/bench-$c.log"; done >"$OUT/bench.log"
  tar -C "$L" -czf "$OUT/bench-json.tar.gz" $(cd "$L" && ls bench-*.json 2>/dev/null) 2>/dev/null
  if [ -f "$L/cbench-weft.log" ]; then  # the C client through weft vs weft bench (acceptance: within 5%)
    step cbench-vs-bench 20 'tail -n 1 $log' -- python3 examples/cbench/compare.py "$L/cbench-weft.log" $(ls "$L"/bench-*.log)
  fi
fi
[ -f "$L/cbench-weft.log" ] && cat "$L/cbench-nccl.log" "$L/cbench-weft.log" "$L/cbench-vs-bench.log" >"$OUT/cbench.log" 2>/dev/null

# ---- summary
save
{
  echo "== gpu-dropin: $NP of $NGPU GPUs, $(( $(date +%s) - T0 ))s, QUICK=${QUICK:-} BENCH_MAX=$BENCH_MAX SOAK_N=$SOAK_N"
  printf '%-20s %-7s %5s  %s\n' step result secs note
  printf '%s\n' "${rows[@]}"
  echo "== $nbad step(s) failed, timed out or skipped"
} | tee "$OUT/summary.txt"
cp "$L/steps.txt" "$WORK/steps.txt" 2>/dev/null
[ "$nbad" -eq 0 ]
