#!/usr/bin/env bash
# Issue 18 (correct under every NCCL client, clean after faults) on a 2-GPU host in one device
# call. Run from the repository root after `make gpu-bundle-harden` here (weft, libweft_nccl.so,
# weft.test and the hal/nvlink and cudadev test binaries in .gpu/; examples/cbench is built there
# from source). Every step is time-boxed and the run stays under BUDGET seconds (default 540).
#
# What it checks:
#   premul-*   ncclRedOpCreatePreMulSum with a different scalar on each rank (examples/cbench
#              -o premulsum), host-immediate and device scalars, every NCCL type, AllReduce,
#              ReduceScatter and Reduce, 8 B to 2 MB (LL and HB ranges; bfloat16 to 256 MB), through
#              libweft_nccl.so and through the system NCCL (the client checked against NCCL too)
#   a2a-*      ncclAlltoAll in place (sendbuff == recvbuff) and out of place, every type to 16 MB,
#              float to 256 MB
#   mpirun-*   the same client under `mpirun -np 2`, one case of each
#   bench-*    weft bench PreMulSum (per-rank scalars) and AlltoAll in place beside NCCL
#   tests      the root package's GPU tests of these items (WEFT_REQUIRE=nvlink)
#   close      item 5: `WEFT_TIMEOUT=200ms weft topo --measure` three times on the GPU backend, and the
#              close-during-launch tests of hal/nvlink and internal/cudadev
#   fit        item 7: a size that cannot fit fails at once, names what was asked and what is free,
#              and leaves no /dev/shm file
#   shm        no weft file of a dead process is left in /dev/shm after the whole run
#
# Files back in $OUT: summary.txt, logs.tar.gz, cbench.log (every cbench row).
# Knobs: STEPS="cbench premul a2a mpirun bench tests close fit shm"  BUDGET=540  MAXB=2M  A2A_MAX=16M  BIG=256M
set -u
# shellcheck source=scripts/steps.sh
source "$(dirname "$0")/steps.sh"
BUDGET=${BUDGET:-540}
STEPS=${STEPS:-"cbench premul a2a mpirun bench tests close fit shm"}
MAXB=${MAXB:-2M}        # the every-type sweeps (LL and HB ranges); one type goes to BIG
A2A_MAX=${A2A_MAX:-16M}
BIG=${BIG:-256M}
LIB=$B/libweft_nccl.so

# steps.sh keeps NVLink multicast off (NCCL_NVLS_ENABLE=0, WEFT_NVLS unset).
export WEFT_REQUIRE=${WEFT_REQUIRE:-nvlink}
NP=${NP:-2}
WEFT_ENV=(env LD_PRELOAD="$LIB" WEFT_NCCL_FALLBACK=0 WEFT_DEBUG=WARN)
REF_ENV=(env -u LD_PRELOAD NCCL_DEBUG=WARN)
CB=examples/cbench/cbench
{ date -u; hostname; nvidia-smi -L; nvidia-smi topo -m; df -h /dev/shm; ls -la "$B"; } >"$L/machine.txt" 2>&1
cat "$L/machine.txt"
shm_before=$(ls /dev/shm | grep -c weft)
wrong() { grep -E "wrong elements in all" $log | tail -n 1; }
pass() { grep -E "^(ok|PASS|FAIL|--- FAIL)" $log | tail -n 3; }

if want cbench; then
  step cbench-build 60 'ls -la $CB | cut -c1-80' -- bash -c "make -C examples/cbench CFLAGS='-O2 -Wall' >/dev/null || \
    gcc -O2 -I/usr/local/cuda/include -o $CB $CB.c -L/usr/local/cuda/lib64 -Wl,-rpath,/usr/local/cuda/lib64 -l:libnccl.so.2 -lcudart -ldl -lm"
fi

# ---- item 1: PreMulSum with per-rank scalars, every type, both residences
PM=(-g "$NP" -t allreduce,reducescatter,reduce -o premulsum -d all -b 8 -e "$MAXB" -f 8 -w 1 -n 2 -G 0 -c 1)
if want premul; then
  for res in host device; do
    step "premul-weft-$res" 90 'wrong' -- "${WEFT_ENV[@]}" $CB "${PM[@]}" -S $res
    step "premul-nccl-$res" 90 'wrong' -- "${REF_ENV[@]}" $CB "${PM[@]}" -S $res
  done
  # CUDA graphs: a device scalar is read when the captured launch runs; to BIG.
  step premul-weft-graph 60 'wrong' -- "${WEFT_ENV[@]}" $CB -g "$NP" -t allreduce,reducescatter,reduce -o premulsum -S device \
    -d bfloat16 -b 8 -e "$BIG" -f 8 -w 2 -n 5 -G 5 -c 1
fi

# ---- item 2: in-place ncclAlltoAll, every type
if want a2a; then
  step a2a-weft 100 'wrong' -- "${WEFT_ENV[@]}" $CB -g "$NP" -t alltoall -d all -b 8 -e "$A2A_MAX" -f 8 -w 1 -n 2 -G 0 -c 1 -p 1
  step a2a-nccl 100 'wrong' -- "${REF_ENV[@]}" $CB -g "$NP" -t alltoall -d all -b 8 -e "$A2A_MAX" -f 8 -w 1 -n 2 -G 0 -c 1 -p 1
  step a2a-weft-big 60 'wrong' -- "${WEFT_ENV[@]}" $CB -g "$NP" -t alltoall -d float -b 32M -e "$BIG" -f 8 -w 1 -n 2 -G 0 -c 1 -p 1
fi

# ---- the same client under mpirun (one process per GPU started by Open MPI)
if want mpirun; then
  MPI=(mpirun --allow-run-as-root --oversubscribe -np "$NP" -x LD_PRELOAD="$LIB" -x WEFT_NCCL_FALLBACK=0 -x NCCL_NVLS_ENABLE=0)
  step mpirun-premul 60 'wrong' -- "${MPI[@]}" $CB -t allreduce,reducescatter,reduce -o premulsum -S device -d float -b 8 -e 16M -f 8 -w 1 -n 2 -c 1
  step mpirun-a2a 60 'wrong' -- "${MPI[@]}" $CB -t alltoall -d half -b 8 -e 16M -f 8 -w 1 -n 2 -c 1 -p 1
fi

# ---- weft bench beside NCCL (per-rank PreMulSum scalars; AlltoAll in place)
if want bench; then
  step bench-premul 80 'grep -E "^# (Out of bounds|Avg bus)" $log' -- \
    "$B/weft" bench all_reduce -o premulsum -d bfloat16 -b 8 -e "$MAXB" -f 8 -G 20 -c 1 --baseline nccl --nproc "$NP"
  step bench-a2a 80 'grep -E "^# (Out of bounds|Avg bus)" $log' -- \
    "$B/weft" bench alltoall -b 8 -e "$A2A_MAX" -f 8 -G 20 -c 1 --baseline nccl --nproc "$NP"
fi

# ---- the root package's GPU tests of these items
if want tests; then
  step test-root 150 'pass' -- "$B/weft.test" -test.count=1 -test.v -test.timeout 140s \
    -test.run "${TEST_RUN:-TestInPlaceAllToAllNVLink}"
fi

# ---- item 5: nothing unmaps memory a launch in flight can touch
if want close; then
  for i in 1 2 3; do
    step "topo-measure-$i" 60 'tail -n 1 $log' -- env WEFT_TIMEOUT=200ms "$B/weft" topo --measure --hal nvlink
  done
  [ -x "$B/hal_nvlink.test" ] && step test-close-nvlink 60 'pass' -- "$B/hal_nvlink.test" -test.count=1 -test.v -test.run "${CLOSE_RUN:-Close}"
  [ -x "$B/internal_cudadev.test" ] && step test-close-cudadev 60 'pass' -- "$B/internal_cudadev.test" -test.count=1 -test.v -test.run "${CLOSE_RUN:-Close}"
fi

# ---- item 7: a size that cannot fit fails at once (exit 2 or 5 is the point: not 0, not a timeout)
if want fit; then
  step fit-device 30 'grep -iE "free|need" $log | head -n 2' -- bash -c \
    "'$B/weft' bench all_reduce --nproc $NP -b 200G -e 200G; rc=\$?; echo exit \$rc; [ \$rc -ne 0 ] && [ \$rc -ne 124 ]"
  step fit-host 30 'grep -iE "free|need" $log | head -n 2' -- bash -c \
    "'$B/weft' bench all_reduce --hal host --nproc $NP -b 512G -e 512G; rc=\$?; echo exit \$rc; [ \$rc -ne 0 ] && [ \$rc -ne 124 ]"
fi

# ---- no weft file of a dead process left in /dev/shm
if want shm; then
  step shm-clean 10 'cat $log | tail -n 2' -- bash -c "n=\$(ls /dev/shm | grep -c weft); echo \"weft files in /dev/shm: before $shm_before, after \$n\"; ls -la /dev/shm | grep weft | head; [ \$n -le $shm_before ]"
fi

for f in "$L"/premul-*.log "$L"/a2a-*.log "$L"/mpirun-*.log; do [ -f "$f" ] && { echo "== $(basename "$f")"; cat "$f"; }; done >"$OUT/cbench.log" 2>/dev/null
save
{
  echo "== gpu-harden: $NP GPUs, $(( $(date +%s) - T0 ))s, MAXB=$MAXB A2A_MAX=$A2A_MAX BIG=$BIG"
  printf '%-20s %-7s %5s  %s\n' step result secs note
  printf '%s\n' "${rows[@]}"
  echo "== $nbad step(s) failed, timed out or skipped"
} | tee "$OUT/summary.txt"
[ "$nbad" -eq 0 ]
