#!/usr/bin/env bash
# Every collective across emulated nodes on one GPU host, in one device call, beside NCCL 2.28.3
# given the same nodes: `weft run --nproc NP --nodes NODES` (WEFT_NODE_ID per rank: ranks 0 …
# NP/NODES−1 on node 0, and so on) with weft between nodes over each transport of NETS (socket,
# ucx) on loopback, and NCCL_HOSTID=emul<node> per rank so that NCCL too uses NVLink inside a node
# and its socket transport between nodes (NCCL_NET=Socket on the same interface). NP/NODES GPUs
# per node: 2 × 1 on a 2-GPU host (issue 22's shape), 2 × 2 on a 4-GPU host (hierarchical plans).
# Sizes below SPLIT run with 20 warm-up and SMALLN timed iterations, the rest with 3 and 20; every
# element is checked (weft bench), and the JSON of each run comes back in logs.tar.gz.
# Run from the repository root after `make gpu-bundle-four` (or any bundle with .gpu/weft):
#   tar -xzf .gpuz/bundle.tgz && NP=4 NODES=2 bash .gpu/gpu-nodes.sh
# Files back in $OUT: summary.txt, sum.txt (NCCL/weft per transport, collective and size),
# logs.tar.gz. Knobs: NP (default: the host's GPUs) NODES=2 NETS="socket ucx"
# COLLS="all_reduce all_gather reduce_scatter alltoall broadcast reduce sendrecv" MAXB=64M
# FACTOR=16 SPLIT=1M SMALLN=200 BUDGET=540; HAL=nvlink and BASELINE="--baseline nccl" (HAL=host
# BASELINE= NP=2 checks the script on a machine without GPUs).
set -u
# shellcheck source=scripts/steps.sh
source "$(dirname "$0")/steps.sh"
BUDGET=${BUDGET:-540}
NP=${NP:-$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')}
NODES=${NODES:-2}
NETS=${NETS:-"socket ucx"}
COLLS=${COLLS:-"all_reduce all_gather reduce_scatter alltoall broadcast reduce sendrecv"}
MAXB=${MAXB:-64M}
FACTOR=${FACTOR:-16}
SPLIT=${SPLIT:-1M}
SMALLN=${SMALLN:-200}
HAL=${HAL:-nvlink}
BASELINE=${BASELINE-"--baseline nccl"}
if [ "$NP" -lt "$NODES" ] || [ $((NP % NODES)) -ne 0 ]; then
  echo "gpu-nodes: NP=$NP ranks do not split into NODES=$NODES nodes of equal size" >&2
  exit 2
fi
STEPS=$(for n in $NETS; do for c in $COLLS; do printf '%s-%s %s-%s-small ' "$n" "$c" "$n" "$c"; done; done)
bytes() { numfmt --from=iec "$1"; }
small_max=0 large_min=0
for ((s = 64; s <= $(bytes "$MAXB"); s *= FACTOR)); do
  if [ "$s" -lt "$(bytes "$SPLIT")" ]; then small_max=$s; elif [ "$large_min" -eq 0 ]; then large_min=$s; fi
done
# UCX's libraries carried in the bundle (make gpu-bundle-accept) where the host has none.
if ! ldconfig -p | grep -q 'libucp.so.0 ' && [ -d "$B/ucx" ]; then
  export LD_LIBRARY_PATH="$B/ucx${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" UCX_MODULE_DIR="$B/ucx/ucx"
fi
export NCCL_NET=Socket NCCL_SOCKET_IFNAME=lo WEFT_SOCKET_IFNAME=lo
{ date -u; hostname; nvidia-smi -L; nvidia-smi topo -m; echo "NP=$NP NODES=$NODES NETS=$NETS"; } >"$L/machine.txt" 2>&1
cat "$L/machine.txt"
rows1() { grep -E '^ +[0-9]+ ' $log | tr -s ' ' | cut -d' ' -f2,7,10,21 | tr '\n' ';'; }
# run NET COLL NAME ARGS...: weft bench of COLL across the nodes over NET, NCCL beside.
run() {
  local net=$1 c=$2 name=$3; shift 3
  step "$name" 150 'rows1' -- env WEFT_NET="$net" "$B/weft" run --nproc "$NP" --nodes "$NODES" -- \
    sh -c 'NCCL_HOSTID=emul$WEFT_NODE_ID exec "$0" "$@"' \
    "$B/weft" bench "$c" "$@" --hal "$HAL" $BASELINE -J "$L/$name.json"
}
for n in $NETS; do
  for c in $COLLS; do
    [ "$small_max" -gt 0 ] && [ "$SMALLN" -gt 0 ] &&
      run "$n" "$c" "$n-$c-small" -b 64 -e "$small_max" -f "$FACTOR" -w 20 -n "$SMALLN"
    [ "$large_min" -gt 0 ] &&
      run "$n" "$c" "$n-$c" -b "$large_min" -e "$MAXB" -f "$FACTOR" -w 3 -n 20
  done
done
python3 "$ROOT/scripts/net-sum.py" "$L" >"$OUT/sum.txt" 2>&1
save
echo "== summary"
cat "$OUT/summary.txt"
echo "== NCCL/weft (out of place)"
cat "$OUT/sum.txt"
exit "$nbad"
