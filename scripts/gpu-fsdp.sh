#!/usr/bin/env bash
# Issue 20 item 7 on a 2-GPU host in one device call: an FSDP2 training step
# (examples/torch/fsdp_step.py: 8 x 4096 -> 16384 -> 4096 bf16 blocks, fully_shard per block,
# AdamW, 4 x 1024 tokens per rank, median of the last 20 of 30 steps) under the real NCCL and
# under weft's drop-in (.gpu/libweft_nccl.so preloaded), each without and with an SM budget
# (weft: WEFT_MAX_CTAS=$CTAS; NCCL: NCCL_MAX_CTAS=$CTAS). The losses and parameter shards of
# every run are compared bit for bit with the NCCL run's, and a table gives the step times,
# weft's calls served/forwarded and the most thread blocks one of its launches held.
# Run from the repository root after `make gpu-bundle` (it puts libweft_nccl.so into .gpu/).
# Every step is time-boxed and the whole run stays under BUDGET seconds (default 150; a run takes
# about 20 s: torchrun, communicators, 2 GB of parameters, 30 steps).
#
# Files back in $OUT: summary.txt, fsdp.txt (the table and the comparison), logs.tar.gz.
#
# Knobs:  CTAS=16  BUDGET=150  NP=2  FSDP_ARGS="..." (more fsdp_step.py flags, e.g. --layers 4)
#         STEPS="nccl weft weft-ctas nccl-ctas" (also weft-ctasN / nccl-ctasN: a budget of N blocks;
#         weft-port: WEFT_ALGO=port, copy-engine plans where a collective has one; weft-ce:
#         WEFT_ALGO=ce, the host-issued copy-engine AllGather; weft-hbSHAPE:
#         WEFT_HB_SHAPE=SHAPE, e.g. weft-hb64x512; weft-gmpN: GOMAXPROCS=N, the Go runtime's threads
#         running Go code; weft-gogcN: GOGC=N or off, the Go collector's target; weft-fwd:
#         WEFT_NCCL_FALLBACK=all, the library loaded and every call forwarded to NCCL; nccl-golib:
#         NCCL with an empty Go c-shared library preloaded, .gpu/libgoempty.so from
#         examples/torch/goempty, the Go runtime in the process without weft; weft-nodesM: the GPUs
#         split into M emulated nodes (WEFT_NODE_ID by local rank, so the network transport, sockets,
#         carries what crosses them) with CUDA_DEVICE_MAX_CONNECTIONS=1 (NODES_CDMC), the run that
#         checks the network path's stream hazard (docs/network.md, "Streams and the network
#         path"): weft serves every call and must complete, its losses within 5% of NCCL's (the
#         multi-node plans sum in another order), with one GPU per node (NP=M) and with several
#         (NP=4 STEPS="nccl weft-nodes2": the hierarchical plans with host network windows; before
#         2026-11-27's fix that run deadlocked, then was refused and forwarded to NCCL; with
#         WEFT_NET_HOST_WINDOWS=0 it still is). A run name may end in @K (nccl@2 weft@2 …): the
#         same run again; interleave NCCL and weft pairs ("nccl weft nccl@2 weft@2 nccl@3 weft@3")
#         and the table ends with the median of the pairs' ratios, steadier than one pair (FSDP2
#         step times move about ±1.5% from run to run on the same machine).
#         NODES_CDMC=1: CUDA_DEVICE_MAX_CONNECTIONS of the weft-nodesM runs (empty: unset, the
#         driver's default). LIB=$B/libweft_nccl.so: the drop-in library the weft runs preload.
#         STEP_LIMIT=45: seconds each run may take (the weft-nodesM runs move half of every
#         collective over loopback sockets: give them more, e.g. STEP_LIMIT=240).
set -u
# shellcheck source=scripts/steps.sh
source "$(dirname "$0")/steps.sh"
LIB=${LIB:-$B/libweft_nccl.so}
NODES_CDMC=${NODES_CDMC-1}
BUDGET=${BUDGET:-150}
STEP_LIMIT=${STEP_LIMIT:-45}
STEPS=${STEPS:-"nccl weft weft-ctas nccl-ctas"}
CTAS=${CTAS:-16}
NP=${NP:-2}

# steps.sh keeps NVLink multicast off (NCCL_NVLS_ENABLE=0, WEFT_NVLS unset); no budget
# from the caller's environment except the one each step sets.
unset WEFT_MAX_CTAS WEFT_MIN_CTAS NCCL_MAX_CTAS NCCL_MIN_CTAS
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=4
PORT=29800
TORCHRUN="python3 -m torch.distributed.run --nproc-per-node $NP --master-addr 127.0.0.1"
# weft preloaded with its NCCL-layer log on (init, first call per kind, calls served/forwarded
# and peak blocks at destroy; nothing per call), or the real NCCL.
WEFT_ENV=(env LD_PRELOAD="$LIB" WEFT_DEBUG=INFO NCCL_DEBUG=INFO)
REF_ENV=(env -u LD_PRELOAD NCCL_DEBUG=WARN)

{
  date -u; hostname; nvidia-smi -L; nvidia-smi topo -m
  python3 -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version(), "gpus", torch.cuda.device_count())'
  ls -la "$LIB" 2>&1
} >"$L/machine.txt" 2>&1
cat "$L/machine.txt"
[ -f "$LIB" ] || echo "!! $LIB is missing: run make gpu-bundle on the development machine"

i=0
for run in $STEPS; do
  i=$((i + 1))
  case ${run%@*} in
    nccl) cmd=("${REF_ENV[@]}") ;;
    nccl-ctas) cmd=("${REF_ENV[@]}" NCCL_MAX_CTAS="$CTAS") ;;
    weft) cmd=("${WEFT_ENV[@]}") ;;
    weft-ctas) cmd=("${WEFT_ENV[@]}" WEFT_MAX_CTAS="$CTAS") ;;
    weft-ctas[0-9]*) cmd=("${WEFT_ENV[@]}" WEFT_MAX_CTAS="${run#weft-ctas}") ;;
    nccl-ctas[0-9]*) cmd=("${REF_ENV[@]}" NCCL_MAX_CTAS="${run#nccl-ctas}") ;;
    weft-port) cmd=("${WEFT_ENV[@]}" WEFT_ALGO=port) ;;
    weft-ce) cmd=("${WEFT_ENV[@]}" WEFT_ALGO=ce) ;;
    weft-hb*) cmd=("${WEFT_ENV[@]}" WEFT_HB_SHAPE="${run#weft-hb}") ;;
    weft-fwd) cmd=("${WEFT_ENV[@]}" WEFT_NCCL_FALLBACK=all) ;;
    nccl-golib) cmd=(env LD_PRELOAD="$B/libgoempty.so" NCCL_DEBUG=WARN) ;;
    weft-gmp[0-9]*) cmd=("${WEFT_ENV[@]}" GOMAXPROCS="${run#weft-gmp}") ;;
    weft-gogc*) cmd=("${WEFT_ENV[@]}" GOGC="${run#weft-gogc}") ;;
    weft-nodes[0-9]*) cmd=("${WEFT_ENV[@]}" WEFT_NET=socket EMULATED_NODES="${run#weft-nodes}")
      if [ -n "$NODES_CDMC" ]; then cmd+=(CUDA_DEVICE_MAX_CONNECTIONS="$NODES_CDMC"); else cmd=(env -u CUDA_DEVICE_MAX_CONNECTIONS "${cmd[@]:1}"); fi ;;
    *) echo "!! unknown step $run (want nccl, nccl-ctas[N], weft, weft-ctas[N], weft-port, weft-ce, weft-hbSHAPE, weft-fwd, nccl-golib, weft-gmpN, weft-gogcN, weft-nodesM)"; nbad=$((nbad + 1)); continue ;;
  esac
  py=(examples/torch/fsdp_step.py)
  case ${run%@*} in
    # Each rank's node from its local rank, set before python starts (the library reads
    # its environment when it loads).
    weft-nodes*) printf '#!/bin/sh\nexport WEFT_NODE_ID=$((LOCAL_RANK * EMULATED_NODES / LOCAL_WORLD_SIZE))\nexec python3 "$@"\n' >"$L/node.sh"
      chmod +x "$L/node.sh"; py=(--no-python "$L/node.sh" examples/torch/fsdp_step.py) ;;
  esac
  step "fsdp-$run" "$STEP_LIMIT" 'grep -E "^# fsdp" $log | cut -d" " -f2-6' -- \
    "${cmd[@]}" $TORCHRUN --master-port $((PORT + i)) "${py[@]}" --out "$L/fsdp-$run.json" ${FSDP_ARGS:-}
done

# The table: step time per run against the NCCL run, losses and shards bit for bit against
# it, and from weft's log the calls it served/forwarded per kind and the most blocks a launch held.
step fsdp-table 20 'tail -n 1 $log' -- python3 - "$L" $STEPS <<'EOF'
import json, os, re, sys

L, runs = sys.argv[1], sys.argv[2:]

def load(run):
    p = os.path.join(L, f"fsdp-{run}.json")
    return json.load(open(p)) if os.path.exists(p) else None

def weft_log(run):
    """calls served/forwarded per kind (summed over ranks and communicators) and the peak blocks."""
    p = os.path.join(L, f"fsdp-{run}.log")
    if not os.path.exists(p):
        return "", ""
    served, fwd, peak = {}, 0, 0
    for line in open(p, errors="replace"):
        if not re.search(r'msg="weft: communicator (destroyed|aborted)"', line):
            continue
        m = re.search(r'calls="([^"]*)"', line)
        for kind, s, f in re.findall(r"(\w+)=(\d+)/(\d+)", m.group(1) if m else ""):
            served[kind] = served.get(kind, 0) + int(s)
            fwd += int(f)
        m = re.search(r"peak_blocks=(\d+)", line)
        peak = max(peak, int(m.group(1))) if m else peak
    calls = " ".join(f"{k}={v}" for k, v in sorted(served.items())) + f" forwarded={fwd}"
    return calls, str(peak) if peak else "?"

ref = load("nccl")
rc = 0
print(f"{'run':<10} {'backend':<8} {'budget':<18} {'median ms':>9} {'NCCL/run':>8}  {'losses vs nccl':<16} {'blocks':>6}  calls (all ranks, served)")
for run in runs:
    d = load(run)
    if d is None:
        print(f"{run:<10} (no result)")
        rc = 1
        continue
    m = d["meta"]
    budget = " ".join(f"{k}={v}" for k, v in m.get("budget", {}).items()) or "-"
    speed = f"{ref['meta']['median_ms'] / m['median_ms']:.3f}" if ref else "-"
    same = "-"
    if ref and run != "nccl":
        a, b = ref["losses"], d["losses"]
        n = sum(1 for x, y in zip(a, b) if x == y)
        shards = ref["meta"].get("shard_checksums") == m.get("shard_checksums")
        same = f"{n}/{len(a)}" + ("" if shards else " shards!")
        if run.split("@")[0].startswith("weft-nodes"):
            # Another summation order: close to NCCL's, not bit-identical.
            # The losses are written as hex floats (bit-exact); compare their values.
            num = lambda v: float.fromhex(v) if isinstance(v, str) else float(v)
            worst = max((abs(num(x) - num(y)) / max(abs(num(x)), 1e-12) for x, y in zip(a, b)), default=0.0)
            same = f"{n}/{len(a)} rel {worst:.1e}"
            if len(a) != len(b) or worst > 0.05:
                rc = 1
        elif n != len(a) or len(a) != len(b) or not shards:
            rc = 1
    want = "weft" if run.startswith("weft") else "nccl"
    if m["backend"] != want:
        rc = 1
    calls, peak = weft_log(run) if want == "weft" else ("", "")
    # weft-fwd forwards every call (WEFT_NCCL_FALLBACK=all): the library loaded, NCCL's kernels.
    if want == "weft" and (calls.endswith("forwarded=0") == (run.split("@")[0] == "weft-fwd")):
        rc = 1
    print(f"{run:<10} {m['backend']:<8} {budget:<18} {m['median_ms']:>9.2f} {speed:>8}  {same:<16} {peak:>6}  {calls}")
# Interleaved pairs (nccl, weft), (nccl@2, weft@2), …: the median of their ratios.
pairs = []
for run in runs:
    if run.split("@")[0] != "nccl":
        continue
    k = run[len("nccl"):]
    a, b = load(run), load("weft" + k)
    if a and b:
        pairs.append(a["meta"]["median_ms"] / b["meta"]["median_ms"])
if len(pairs) > 1:
    srt = sorted(pairs)
    med = srt[len(srt) // 2] if len(srt) % 2 else (srt[len(srt) // 2 - 1] + srt[len(srt) // 2]) / 2
    print(f"# NCCL/weft over {len(pairs)} interleaved pairs: " + " ".join(f"{x:.3f}" for x in pairs) + f"; median {med:.3f}")
if ref:
    m = ref["meta"]
    print(f"# {m['device']} x{m['world']}, torch {m['torch']}, NCCL {m['nccl_version']}, {m['params']} parameters, "
          f"{m['layers']} x {m['dim']}->{m['hidden']}->{m['dim']}, batch {m['batch']} x {m['seq']}, median of {m['measure']} of {m['steps']} steps")
print("fsdp: losses and shards bit-identical to NCCL's, every weft call served by weft" if rc == 0 else
      "fsdp: FAIL (a run missing, a backend not the one asked for, losses or shards differing, or calls forwarded)")
sys.exit(rc)
EOF
cp "$L/fsdp-table.log" "$OUT/fsdp.txt" 2>/dev/null

# ---- summary
save
{
  echo "== gpu-fsdp: $NP GPUs, $(( $(date +%s) - T0 ))s, CTAS=$CTAS FSDP_ARGS=${FSDP_ARGS:-}"
  printf '%-20s %-7s %5s  %s\n' step result secs note
  printf '%s\n' "${rows[@]}"
  echo "== $nbad step(s) failed, timed out or skipped"
} | tee "$OUT/summary.txt"
cat "$OUT/fsdp.txt" 2>/dev/null
[ "$nbad" -eq 0 ]
