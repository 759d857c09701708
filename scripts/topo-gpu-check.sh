#!/usr/bin/env bash
# topo-gpu-check.sh — check `weft topo` on a GPU host against nvidia-smi and
# NCCL (issue 3's acceptance on the 4×H200 host).
#
# Run from the repository root on the GPU host, with a weft binary built on
# the development machine (there is no Go toolchain on the GPU hosts):
#
#   dev$  go build -o bin/weft ./cmd/weft
#   gpu$  OUT=/some/dir scripts/topo-gpu-check.sh
#
# It writes to $OUT (default gpu-out/topo):
#   nvidia-smi-topo.txt, nvidia-smi-nvlink.txt   what NVIDIA's tool reports
#   weft-topo.txt, weft-topo.json, t.xml, topo.svg, topo.dot
#   matrix-compare.txt    GPU×GPU cells of both matrices side by side, and
#                         whether they agree (exit status 1 if not)
#   nccl-own.log          NCCL with its own detection (NCCL_TOPO_DUMP_FILE
#                         writes nccl-detected.xml)
#   nccl-weft.log         NCCL loading weft's t.xml (NCCL_TOPO_FILE)
#   nccl-graph-diff.txt   the GRAPH lines of both runs, normalised, diffed
#   weft-measure.txt      weft topo --measure (peer bandwidth through the HAL)
#   summary.txt           what passed and what did not
#
# NCCL runs use nccl-tests' all_reduce_perf when it is on PATH, otherwise a
# two-line torch.distributed all_reduce started by torchrun. NVLink SHARP
# stays off (NCCL_NVLS_ENABLE=0; architecture.md §8).
set -u

OUT=${OUT:-gpu-out/topo}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
export NCCL_NVLS_ENABLE=0

WEFT=${WEFT:-}
for c in "$WEFT" bin/weft .gpu/weft ./weft "$(command -v weft 2>/dev/null)"; do
  if [ -n "$c" ] && [ -x "$c" ]; then WEFT=$c; break; fi
done
if [ -z "$WEFT" ] || [ ! -x "$WEFT" ]; then
  echo "topo-gpu-check: no weft binary (set WEFT=path or build bin/weft)" >&2
  exit 2
fi

summary() { echo "$*" | tee -a "$OUT/summary.txt"; }
: > "$OUT/summary.txt"
summary "host: $(hostname)  date: $(date -u +%FT%TZ)  weft: $WEFT"

# 1. NVIDIA's view.
nvidia-smi topo -m > "$OUT/nvidia-smi-topo.txt" 2>&1
nvidia-smi nvlink -s > "$OUT/nvidia-smi-nvlink.txt" 2>&1
nvidia-smi -q 2>/dev/null | grep -A 6 -i "fabric" > "$OUT/nvidia-smi-fabric.txt"
NGPU=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
summary "GPUs (nvidia-smi -L): $NGPU"

# 2. weft's view, in every format.
"$WEFT" topo > "$OUT/weft-topo.txt" 2>&1; summary "weft topo: exit $?"
"$WEFT" topo --format json > "$OUT/weft-topo.json" 2>"$OUT/weft-topo-json.err"; summary "weft topo --format json: exit $?"
"$WEFT" topo --format xml > "$OUT/t.xml" 2>"$OUT/weft-topo-xml.err"; summary "weft topo --format xml: exit $?"
"$WEFT" topo --format svg > "$OUT/topo.svg" 2>/dev/null
"$WEFT" topo --format dot > "$OUT/topo.dot" 2>/dev/null

# 3. Compare the GPU×GPU part of both matrices (rows starting with GPUn).
python3 - "$OUT/nvidia-smi-topo.txt" "$OUT/weft-topo.txt" > "$OUT/matrix-compare.txt" <<'PY'
import re, sys
def gpu_matrix(path, n=None):
    rows = {}
    for line in open(path, errors="replace"):
        # nvidia-smi may colour its output; strip escapes.
        line = re.sub(r"\x1b\[[0-9;]*m", "", line)
        f = line.split()
        # The first matrix only: weft prints bandwidth and P2P ones after it.
        if f and re.fullmatch(r"GPU\d+", f[0]) and "X" in f[1:] and f[0] not in rows:
            rows[f[0]] = f[1:]
    return rows
a, b = gpu_matrix(sys.argv[1]), gpu_matrix(sys.argv[2])
gpus = sorted(a, key=lambda g: int(g[3:]))
ok = bool(gpus)
print("%-6s %-24s %-24s" % ("", "nvidia-smi", "weft"))
for g in gpus:
    ra, rb = a[g][:len(gpus)], b.get(g, [])[:len(gpus)]
    same = ra == rb
    ok &= same
    print("%-6s %-24s %-24s %s" % (g, " ".join(ra), " ".join(rb), "same" if same else "DIFFERENT"))
print("GPU matrices agree" if ok else "GPU matrices DIFFER")
sys.exit(0 if ok else 1)
PY
summary "matrix compare: $(tail -1 "$OUT/matrix-compare.txt")"

# 4. NCCL with its own detection, then with weft's XML.
run_nccl() { # $1 = log file; extra environment comes from the caller
  local log=$1 np=$NGPU
  [ "$np" -gt 4 ] && np=4
  if command -v all_reduce_perf >/dev/null 2>&1; then
    timeout 300 all_reduce_perf -b 8 -e 256M -f 4 -g "$np" > "$log" 2>&1
  else
    cat > "$OUT/nccl_allreduce.py" <<'PY'
import os, torch, torch.distributed as dist
dist.init_process_group("nccl")
r = dist.get_rank(); torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
x = torch.ones(64 << 20, device="cuda")
for _ in range(5): dist.all_reduce(x)
torch.cuda.synchronize()
print(f"rank {r}: all_reduce ok, x[0]={x[0].item()} (expect {dist.get_world_size() ** 5})", flush=True)
dist.destroy_process_group()
PY
    timeout 300 python3 -m torch.distributed.run --standalone --nproc_per_node="$np" "$OUT/nccl_allreduce.py" > "$log" 2>&1
  fi
  echo $?
}
rc=$(NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,GRAPH,ENV NCCL_TOPO_DUMP_FILE="$OUT/nccl-detected.xml" run_nccl "$OUT/nccl-own.log")
summary "NCCL, own detection: exit $rc ($(grep -m1 -o 'NCCL version [0-9.+a-z]*' "$OUT/nccl-own.log"))"
rc=$(NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,GRAPH,ENV NCCL_TOPO_FILE="$OUT/t.xml" run_nccl "$OUT/nccl-weft.log")
summary "NCCL, NCCL_TOPO_FILE=t.xml: exit $rc; loaded: $(grep -c 'Loading topology' "$OUT/nccl-weft.log") line(s)"

# The graph NCCL built: the system print-out (=== System ...), paths, and the
# ring/tree patterns it searched, with host/pid prefixes removed.
graph() {
  sed -E 's/^[^ ]+:[0-9]+:[0-9]+ \[[0-9]+\] NCCL INFO //' "$1" |
    grep -E '=== System|^ *(CPU|GPU|NIC|NET|NVS|PCI)/|\+ (NVL|PCI|SYS|NET|LOC|C2C)\[|Pattern|Tree [0-9]|Ring [0-9]+ :|nChannels|Channel [0-9]+/[0-9]+ :|P2P Chunksize|Connected all' |
    sed -E 's/[0-9]+\.[0-9]+ ms//g' | sort -u
}
graph "$OUT/nccl-own.log" > "$OUT/nccl-graph-own.txt"
graph "$OUT/nccl-weft.log" > "$OUT/nccl-graph-weft.txt"
if diff -u "$OUT/nccl-graph-own.txt" "$OUT/nccl-graph-weft.txt" > "$OUT/nccl-graph-diff.txt"; then
  summary "NCCL graph with weft's XML: identical to its own detection ($(wc -l < "$OUT/nccl-graph-own.txt") lines compared)"
else
  summary "NCCL graph with weft's XML: DIFFERS (see nccl-graph-diff.txt, $(grep -c '^[-+][^-+]' "$OUT/nccl-graph-diff.txt") lines)"
fi

# 5. Measured peer bandwidth through the HAL.
timeout 300 "$WEFT" topo --measure > "$OUT/weft-measure.txt" 2>&1
summary "weft topo --measure: exit $?"
grep -A $((NGPU + 2)) 'Measured put bandwidth' "$OUT/weft-measure.txt" | tee -a "$OUT/summary.txt"
# One archive as well, for tools that fetch a limited number of files.
tar -C "$OUT" -czf "$OUT/../topo-gpu-check.tgz" . && mv "$OUT/../topo-gpu-check.tgz" "$OUT/"
exit 0
