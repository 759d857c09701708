#!/usr/bin/env bash
# Probes for issues 20 and 22 in one device call, before optimising (measure first):
#  - fsdp: the FSDP2 step (examples/torch/fsdp_step.py) under NCCL and under weft's drop-in with
#    torch.profiler over the last 3 steps: per-rank kernel tables by GPU time and rank 0's trace.
#  - ucx: the host's UCX (ucx_info) and 2 emulated nodes over UCX with WEFT_UCX_STAGING=auto and
#    =always (and over sockets for reference), all_reduce and all_gather 1–16 MB, beside NCCL's
#    socket transport in the same processes.
# Run from the repository root after `make gpu-bundle-accept` (tar -xzf .gpuz/bundle.tgz first).
# Files back in $OUT: summary.txt, logs.tar.gz, prof-*.txt, prof-*-rank0.json.gz.
#  - porthang: the FSDP2 step with WEFT_ALGO=port (copy-engine AllGather), which stalls in the
#    7th AllGather, with CUDA_DEVICE_MAX_CONNECTIONS 8 (the default), 1 and 32: the library logs
#    its FIFOs and copy engines when the wait times out (WEFT_TIMEOUT=30s, WEFT_DEBUG=WARN).
#  - streams: the root package's TestCallsAcrossStreamsNVLink (calls on two streams in issue order).
#  - join: examples/cbench -s 1 (a group's sends on one stream, its receives on another, forked and
#    joined by events) for sendrecv and grouped alltoall, plain launches and CUDA graphs, through
#    libweft_nccl.so and beside NCCL: one launch over joined streams must neither hang nor be wrong.
#  - shapes: weft bench beside NCCL (8 MB - 512 MB, float) of sendrecv under WEFT_P2P_SHAPE
#    variants, broadcast and reduce under WEFT_ROOTED_SHAPE variants, alltoall under
#    WEFT_HB_SHAPE variants (P2P_SHAPES, ROOTED_SHAPES, HB_SHAPES: space-separated, "default" =
#    unset), to choose the windowed plans' defaults on this GPU.
#  - p2pwin: gather, scatter and sendrecv at 2-32 MB through the C ABI under WEFT_P2P_SHAPE variants
#    (P2PWIN_SHAPES; ",pull" variants read each window from the sender's scratch; up to
#    P2PWIN_MAXB), beside NCCL.
#  - midll: AllGather, ReduceScatter, AllToAll at 64 KB-4 MB (wide LL plans) beside WEFT_ALGO=hb
#    and NCCL, float and bfloat16, checked.
#  - ce: the host-issued copy-engine AllGather (WEFT_ALGO=ce): its GPU test, conformance
#    stream-ops, cbench beside NCCL and beside weft's SM plans, port latency, FSDP2 in pairs with
#    NCCL (CE_FSDP) and under 1 hardware queue.
#  - cedefault: the default selection (copy-engine AllGather from 32 MiB): cbench AllGather beside
#    NCCL, FSDP2 in pairs (CED_FSDP).
#  - calls: the port path's floor without the proxy: BenchmarkCopyEngineLatency and
#    BenchmarkDriverCallCost (host µs of each CUDA driver call an engine makes), then the port
#    put-with-signal one way with WEFT_PROXY_PROFILE (the proxy's poll gap and engine calls).
#  - netprof: 2 emulated nodes over sockets (loopback), all_gather, all_reduce, broadcast and
#    sendrecv at 64 B-64 KB beside NCCL's socket transport, with WEFT_PROXY_PROFILE (proxy,
#    socket engines and receivers by stage), for each WEFT_NET_HOST_WINDOWS in NETPROF_HW.
#  - ab: the same cbench sweep (AB_COLLS, 1-64 MB, float, graphs, checked) through
#    libweft_nccl.so and through AB_LIB (a second build carried in the call, e.g. the parent
#    commit's: go build -buildmode=c-shared -o .gpuz/old/libweft_nccl.so ./nccl in a worktree),
#    alternated twice, and NCCL once: a change measured against its base on one machine.
# Knobs: STEPS="fsdp ucx porthang streams join shapes p2pwin midll ce cedefault calls netprof ab"
#        BUDGET=300  PORTHANG_CONNS="8 1" (also 32)  NETPROF_HW="1 0"  NETPROF_COLLS="all_gather …"  AB_LIB=.gpuz/old/libweft_nccl.so
#        AB_COLLS=allreduce,allgather,gather,scatter,broadcast,reduce,sendrecv
set -u
# shellcheck source=scripts/steps.sh
source "$(dirname "$0")/steps.sh"
BUDGET=${BUDGET:-300}
STEPS=${STEPS:-"fsdp ucx"}
LIB=$B/libweft_nccl.so
unset WEFT_MAX_CTAS NCCL_MAX_CTAS
{ date -u; hostname; nvidia-smi -L; ls -la "$B"; } >"$L/machine.txt" 2>&1
if want fsdp; then
  export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=4
  TR="python3 -m torch.distributed.run --nproc-per-node 2 --master-addr 127.0.0.1"
  FA=(--steps 15 --measure 8)
  step fsdp-nccl 60 'grep -E "^# fsdp" $log | cut -d" " -f2-6' -- env -u LD_PRELOAD NCCL_DEBUG=WARN \
    $TR --master-port 29811 examples/torch/fsdp_step.py --out "$L/fsdp-nccl.json" --profile "$OUT/prof-nccl" "${FA[@]}"
  step fsdp-weft 60 'grep -E "^# fsdp" $log | cut -d" " -f2-6' -- env LD_PRELOAD="$LIB" NCCL_DEBUG=WARN \
    $TR --master-port 29812 examples/torch/fsdp_step.py --out "$L/fsdp-weft.json" --profile "$OUT/prof-weft" "${FA[@]}"
  # Where the step's time goes: compute-stream gaps the host caused against those waiting on a
  # collective, per backend (examples/torch/trace_gaps.py).
  step fsdp-gaps 30 'grep -E "gaps:" $log' -- python3 examples/torch/trace_gaps.py \
    nccl="$OUT/prof-nccl-rank0.json.gz" weft="$OUT/prof-weft-rank0.json.gz"
  cp "$L/fsdp-gaps.log" "$OUT/fsdp-gaps.txt" 2>/dev/null
fi
if want ucx; then
  if ! ldconfig -p | grep -q 'libucp.so.0 ' && [ -d "$B/ucx" ]; then
    export LD_LIBRARY_PATH="$B/ucx${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" UCX_MODULE_DIR="$B/ucx/ucx"
  fi
  step ucx-info 15 'grep -ciE "transport:" $log' -- bash -c 'ucx_info -v; ucx_info -d | grep -E "Memory domain|Component|Transport|Device|memory types"; ldconfig -p | grep -E "libuc[pst]"'
  export NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_NET=Socket NCCL_SOCKET_IFNAME=lo WEFT_SOCKET_IFNAME=lo
  for v in "ucx auto" "ucx always" "socket auto"; do
    set -- $v
    for c in all_reduce all_gather; do
      step "$1-$2-$c" 45 'grep -E "^ +(1048576|16777216) " $log | tr -s " " | cut -c1-100' -- \
        env WEFT_NET="$1" WEFT_UCX_STAGING="$2" UCX_LOG_LEVEL=info "$B/weft" run --nproc 2 --nodes 2 -- "$B/weft" bench "$c" \
        -b 1M -e 16M -f 4 -w 2 -n 10 --hal nvlink --baseline nccl
    done
  done
  step ucx-seg1m 45 'grep -E "^ +(1048576|16777216) " $log | tr -s " " | cut -c1-100' -- \
    env WEFT_NET=ucx UCX_TCP_TX_SEG_SIZE=1m UCX_TCP_RX_SEG_SIZE=1m "$B/weft" run --nproc 2 --nodes 2 -- "$B/weft" bench all_reduce \
    -b 1M -e 16M -f 4 -w 2 -n 10 --hal nvlink --baseline nccl
  step ucx-tls-tcp 45 'grep -E "^ +(1048576|16777216) " $log | tr -s " " | cut -c1-100' -- \
    env WEFT_NET=ucx UCX_TLS=tcp,self UCX_LOG_LEVEL=info "$B/weft" run --nproc 2 --nodes 2 -- "$B/weft" bench all_reduce \
    -b 1M -e 16M -f 4 -w 2 -n 10 --hal nvlink --baseline nccl
fi
if want streams; then
  step streams 60 'grep -E "^(--- |ok|PASS|FAIL)" $log | tr "\n" " "' -- env WEFT_REQUIRE=nvlink "$B/weft.test" -test.count=1 -test.v \
    -test.run 'TestCallsAcrossStreamsNVLink'
fi
if want join; then
  CB=examples/cbench/cbench
  step cbench-build 60 'ls -la $CB | cut -c1-80' -- bash -c "make -C examples/cbench CFLAGS='-O2 -Wall' >/dev/null || \
    gcc -O2 -I/usr/local/cuda/include -o $CB $CB.c -L/usr/local/cuda/lib64 -Wl,-rpath,/usr/local/cuda/lib64 -l:libnccl.so.2 -lcudart -ldl -lm"
  for g in 0 10; do
    JA=(-g 2 -s 1 -t sendrecv,alltoall -a p2p -b 8 -e 64M -f 8 -w 2 -n 5 -G "$g" -c 1 -p 1)
    step "join-weft-G$g" 45 'grep -E "wrong elements in all" $log' -- env LD_PRELOAD="$LIB" WEFT_NCCL_FALLBACK=0 \
      WEFT_DEBUG=WARN WEFT_TIMEOUT=20s $CB "${JA[@]}"
    step "join-nccl-G$g" 45 'grep -E "wrong elements in all" $log' -- env -u LD_PRELOAD NCCL_DEBUG=WARN $CB "${JA[@]}"
  done
  cat "$L"/join-*.log >"$OUT/join.log" 2>/dev/null
fi
if want shapes; then
  rowsL() { grep -E "^ +(8388608|33554432|134217728|536870912) " $log | awk '{printf "%s:%s/%s=%s ", $1/1048576, $8, $15, $20}'; }
  shape_runs() { # VAR COLL SHAPES...
    local var=$1 coll=$2; shift 2
    for sh in "$@"; do
      local v=$sh; [ "$sh" = default ] && v=
      step "shape-$coll-$sh" 40 'rowsL' -- env "$var=$v" "$B/weft" bench "$coll" -b 8M -e 512M -f 4 -w 3 -n 10 \
        --baseline nccl --nproc 2 --hal nvlink -c 0
    done
  }
  shape_runs WEFT_P2P_SHAPE sendrecv ${P2P_SHAPES:-default 44x1024w4M 44x1024w8M 32x1024w8M 64x512w8M 22x1024w8M}
  for c in broadcast reduce; do
    shape_runs WEFT_ROOTED_SHAPE $c ${ROOTED_SHAPES:-default 64x1024w8M 32x1024w8M 64x1024w16M}
  done
  shape_runs WEFT_HB_SHAPE alltoall ${HB_SHAPES:-default 32x1024w8M 48x1024w4M}
fi
if want p2pwin; then
  # Gather and scatter (one direction: the root's receive group copies out of its scratch while the
  # peer writes) at 2-32 MB through libweft_nccl.so under WEFT_P2P_SHAPE variants, beside NCCL:
  # whether more, smaller windows (the copy-out overlapped) beat one window at these sizes.
  CB=examples/cbench/cbench
  [ -x $CB ] || make -C examples/cbench CFLAGS='-O2 -Wall' >/dev/null 2>&1
  PA=(-g 2 -t gather,scatter,sendrecv -b "${P2PWIN_MINB:-2M}" -e "${P2PWIN_MAXB:-32M}" -f 2 -w 3 -n 20 -G 10 -c 1 -p 0)
  step p2pwin-nccl 40 'grep -E "wrong elements in all" $log' -- env -u LD_PRELOAD NCCL_DEBUG=WARN $CB "${PA[@]}"
  for sh in ${P2PWIN_SHAPES:-default 44x1024w1M 44x1024w4M 64x512w2M}; do
    v=$sh; [ "$sh" = default ] && v=
    step "p2pwin-$sh" 40 'grep -E "wrong elements in all" $log' -- env LD_PRELOAD="$LIB" WEFT_NCCL_FALLBACK=0 \
      WEFT_DEBUG=WARN WEFT_P2P_SHAPE="$v" $CB "${PA[@]}"
  done
  cat "$L"/p2pwin-*.log >"$OUT/p2pwin.log" 2>/dev/null
fi
if want midll; then
  # AllGather, ReduceScatter and AllToAll at 64 KB-4 MB through libweft_nccl.so (the wide LL
  # plans from 64 KiB segments), beside the windowed plans alone (WEFT_ALGO=hb) and NCCL, float
  # and bfloat16, in and out of place, checked.
  CB=examples/cbench/cbench
  [ -x $CB ] || make -C examples/cbench CFLAGS='-O2 -Wall' >/dev/null 2>&1
  for d in float bfloat16; do
    MA=(-g 2 -t allgather,reducescatter,alltoall -d $d -b 64K -e 4M -f 2 -w 3 -n 20 -G 10 -c 1 -p 1)
    step "midll-nccl-$d" 40 'grep -E "wrong elements in all" $log' -- env -u LD_PRELOAD NCCL_DEBUG=WARN $CB "${MA[@]}"
    step "midll-weft-$d" 40 'grep -E "wrong elements in all" $log' -- env LD_PRELOAD="$LIB" WEFT_NCCL_FALLBACK=0 \
      WEFT_DEBUG=WARN $CB "${MA[@]}"
  done
  step midll-weft-hb 40 'grep -E "wrong elements in all" $log' -- env LD_PRELOAD="$LIB" WEFT_NCCL_FALLBACK=0 \
    WEFT_DEBUG=WARN WEFT_ALGO=hb $CB -g 2 -t allgather,reducescatter,alltoall -d float -b 64K -e 4M -f 2 -w 3 -n 20 -G 10 -c 1 -p 1
  cat "$L"/midll-*.log >"$OUT/midll.log" 2>/dev/null
fi
if want ce; then
  # The host-issued copy-engine AllGather (WEFT_ALGO=ce, ce.go) on GPUs, first run: the
  # stream-ops conformance case, then AllGather through libweft_nccl.so beside NCCL (float and
  # bfloat16, CUDA graphs, in and out of place, checked), then FSDP2 with it under 8 and 1
  # hardware queues (the kernel-driven copy engines stalled there).
  step ce-test 60 'pass' -- env WEFT_REQUIRE=nvlink "$B/weft.test" -test.count=1 -test.v -test.run 'TestCEAllGatherNVLink'
  step ce-conformance 90 'grep -E "stream-ops" $log' -- env WEFT_REQUIRE=nvlink "$B/weft" conformance --hal nvlink \
    --ranks 2 --run memory-mapped/stream-ops
  CB=examples/cbench/cbench
  [ -x $CB ] || make -C examples/cbench CFLAGS='-O2 -Wall' >/dev/null 2>&1
  for d in float bfloat16; do
    CEA=(-g 2 -t allgather -d $d -b 8 -e 1G -f 4 -w 3 -n 10 -G 10 -c 1 -p 1)
    step "ce-weft-$d" 60 'grep -E "wrong elements in all" $log' -- env LD_PRELOAD="$LIB" WEFT_NCCL_FALLBACK=0 WEFT_ALGO=ce \
      WEFT_DEBUG=WARN WEFT_TIMEOUT=20s $CB "${CEA[@]}"
    step "ce-nccl-$d" 60 'grep -E "wrong elements in all" $log' -- env -u LD_PRELOAD NCCL_DEBUG=WARN $CB "${CEA[@]}"
  done
  # Host cost of a call without graphs (-H 1), per driver call and batched (WEFT_STREAM_BATCH=1:
  # consecutive flag operations in one cuStreamBatchMemOp), with the launch stages profiled.
  for b in 0 1; do
    step "ce-host-batch$b" 40 'grep -E "wrong elements in all|copy-engine ops queued" $log | cut -c1-200' -- env LD_PRELOAD="$LIB" \
      WEFT_NCCL_FALLBACK=0 WEFT_ALGO=ce WEFT_STREAM_BATCH=$b WEFT_PROXY_PROFILE=1 WEFT_DEBUG=WARN WEFT_TIMEOUT=20s \
      $CB -g 2 -t allgather -d bfloat16 -b 32M -e 512M -f 4 -w 5 -n 20 -G 0 -c 1 -p 1 -H 1
  done
  # weft's kernel plans on the same sizes, for the choice between them.
  step "ce-weftsm-float" 60 'grep -E "wrong elements in all" $log' -- env LD_PRELOAD="$LIB" WEFT_NCCL_FALLBACK=0 \
    WEFT_DEBUG=WARN $CB -g 2 -t allgather -d float -b 8 -e 1G -f 4 -w 3 -n 10 -G 10 -c 1 -p 1
  cat "$L"/ce-*.log >"$OUT/ce.log" 2>/dev/null
  # Put-with-signal one way on the port path: its signals are cuStreamWriteValue64 where the
  # device reports the v2 64-bit stream operations (attribute 122), 8-byte copies otherwise.
  step ce-port-latency 40 'grep -E "us/one|ns/op" $log | tr -s " " | cut -c1-110' -- \
    env WEFT_BENCH_HAL=nvlink "$B/weft.test" -test.run '^$' -test.bench PortLatency -test.benchtime 3x
  export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=4
  # Step time beside NCCL in interleaved pairs, every call served (gpu-fsdp.sh's table).
  step ce-fsdp 170 'grep -E "^weft-ce|^# NCCL/weft|served" $log | tr -s " " | cut -c1-160' -- env OUT="$WORK/ce-fsdp" \
    BUDGET=160 STEPS="${CE_FSDP:-nccl weft-ce weft nccl@2 weft-ce@2 weft@2}" bash "$(dirname "$0")/gpu-fsdp.sh"
  cp "$WORK/ce-fsdp/fsdp.txt" "$OUT/ce-fsdp.txt" 2>/dev/null
  # One hardware queue: the kernel-driven copy engines stalled here; the host-issued ones must not.
  step ce-fsdp-conn1 90 'grep -E "^# fsdp|timed out|not serve" $log | head -n 2 | cut -c1-120' -- \
    env LD_PRELOAD="$LIB" WEFT_ALGO=ce WEFT_NCCL_FALLBACK=0 WEFT_TIMEOUT=30s WEFT_DEBUG=WARN NCCL_DEBUG=WARN \
    CUDA_DEVICE_MAX_CONNECTIONS=1 python3 -m torch.distributed.run --nproc-per-node 2 --master-addr 127.0.0.1 \
    --master-port 29831 examples/torch/fsdp_step.py --out "$L/ce-fsdp-1.json"
fi
if want cedefault; then
  # The default selection with the copy-engine AllGather from 32 MiB to 512 MiB (WEFT_CE_MIN_BYTES,
  # WEFT_CE_MAX_BYTES): the
  # AllGather curve through libweft_nccl.so beside NCCL (the switch at 32 MB, 0 wrong), then the
  # FSDP2 step in interleaved pairs with nothing set.
  CB=examples/cbench/cbench
  [ -x $CB ] || make -C examples/cbench CFLAGS='-O2 -Wall' >/dev/null 2>&1
  for d in float bfloat16; do
    CEA=(-g 2 -t allgather -d $d -b 8 -e 1G -f 4 -w 3 -n 10 -G 10 -c 1 -p 1)
    step "ced-weft-$d" 60 'grep -E "wrong elements in all" $log' -- env LD_PRELOAD="$LIB" WEFT_NCCL_FALLBACK=0 \
      WEFT_DEBUG=WARN $CB "${CEA[@]}"
    step "ced-nccl-$d" 60 'grep -E "wrong elements in all" $log' -- env -u LD_PRELOAD NCCL_DEBUG=WARN $CB "${CEA[@]}"
  done
  cat "$L"/ced-*.log >"$OUT/ced.log" 2>/dev/null
  export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=4
  step ced-fsdp 150 'grep -E "^weft|^# NCCL/weft|served" $log | tr -s " " | cut -c1-160' -- env OUT="$WORK/ced-fsdp" \
    BUDGET=140 STEPS="${CED_FSDP:-nccl weft nccl@2 weft@2}" bash "$(dirname "$0")/gpu-fsdp.sh"
  cp "$WORK/ced-fsdp/fsdp.txt" "$OUT/ced-fsdp.txt" 2>/dev/null
fi
if want porthang; then
  # The stall is logged by the library itself: a wait that times out logs every port-channel FIFO
  # and each copy engine's last queued value per semaphore ("port channels at a timed-out wait",
  # WEFT_DEBUG=WARN). Observed one below the engine's value: the signal was queued but the copy
  # engine's stream never ran it (held up behind other work in its hardware queue); observed at the
  # engine's value: the proxy was never asked. CUDA_DEVICE_MAX_CONNECTIONS=1 puts every stream in one
  # hardware queue: if the stall is a false dependency between streams, it comes at the first
  # AllGather there; with 32 queues, later or never.
  export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=4
  for conn in ${PORTHANG_CONNS:-8 1}; do
    step "porthang-conn$conn" 150 'grep -cE "port channels at a timed-out wait" $log; grep -oE "expected [0-9]+, observed [0-9]+" $log | head -n 2' -- \
      env LD_PRELOAD="$LIB" WEFT_ALGO=port WEFT_TIMEOUT=30s WEFT_DEBUG=WARN NCCL_DEBUG=WARN CUDA_DEVICE_MAX_CONNECTIONS=$conn \
      python3 -m torch.distributed.run --nproc-per-node 2 --master-addr 127.0.0.1 --master-port $((29813 + conn)) \
      examples/torch/fsdp_step.py --out "$L/porthang-$conn.json" --steps 6 --measure 2
  done
fi
if want calls; then
  step calls-engine 90 'grep -E "us/(issue|call)" $log | tr -s " \t" " " | cut -c1-90' -- env WEFT_REQUIRE=nvlink \
    "$B/internal_cudadev.test" -test.run '^$' -test.bench 'CopyEngineLatency|DriverCallCost' -test.benchtime 3000x
  step calls-port 60 'grep -E "one-way|engine (put|signal) call" $log | cut -c1-160' -- env WEFT_PROXY_PROFILE=1 \
    WEFT_BENCH_HAL=nvlink "$B/weft.test" -test.run '^$' -test.bench 'PortLatency/nvlink/port' -test.benchtime 1x
fi
if want netprof; then
  # NETPROF_HW: WEFT_NET_HOST_WINDOWS values to run (1: plans' windows in host memory, the
  # default; 0: device memory, the path before it), each beside NCCL.
  for hw in ${NETPROF_HW:-1 0}; do
    for c in ${NETPROF_COLLS:-all_gather all_reduce broadcast sendrecv}; do
      step "netprof-hw$hw-$c" 60 'grep -E "^ +(64|4096|65536) " $log | tr -s " " | cut -c1-120' -- env NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 \
        NCCL_NET=Socket NCCL_SOCKET_IFNAME=lo WEFT_SOCKET_IFNAME=lo WEFT_NET=socket WEFT_PROXY_PROFILE=1 WEFT_NET_HOST_WINDOWS=$hw \
        "$B/weft" run --nproc 2 --nodes 2 -- "$B/weft" bench $c -b 64 -e 64K -f 32 -w 5 -n 200 --hal nvlink --baseline nccl
    done
  done
fi
if want ab; then
  CB=examples/cbench/cbench
  [ -x $CB ] || make -C examples/cbench CFLAGS='-O2 -Wall' >/dev/null 2>&1
  ABL=$ROOT/${AB_LIB:-.gpuz/old/libweft_nccl.so}
  ABA=(-g 2 -t "${AB_COLLS:-allreduce,allgather,gather,scatter,broadcast,reduce,sendrecv}" -d float -b 1M -e 64M -f 2 -w 5 -n 20 -G 10 -c 1 -p 0)
  for i in 1 2; do
    step "ab-new-$i" 60 'grep -E "wrong elements in all" $log' -- env LD_PRELOAD="$LIB" WEFT_NCCL_FALLBACK=0 WEFT_DEBUG=WARN $CB "${ABA[@]}"
    step "ab-base-$i" 60 'grep -E "wrong elements in all" $log' -- env LD_PRELOAD="$ABL" WEFT_NCCL_FALLBACK=0 WEFT_DEBUG=WARN $CB "${ABA[@]}"
  done
  step ab-nccl 60 'grep -E "wrong elements in all" $log' -- env -u LD_PRELOAD NCCL_DEBUG=WARN $CB "${ABA[@]}"
fi
save
echo "== summary =="
cat "$OUT/summary.txt"
exit "$nbad"
