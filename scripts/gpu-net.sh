#!/usr/bin/env bash
# Issues 9 and 22 on a 2-GPU host in one device call: the host as 2 emulated nodes × 1 GPU
# (weft run --nodes 2: WEFT_NODE_ID per rank), so every byte between the GPUs goes through a
# network transport (NETS: hal/socket and/or hal/ucx, host-staged), beside NCCL forced onto its socket transport
# (NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_NET=Socket) in the same processes and run.
# Run from the repository root after `make gpu-bundle-net` here. Files back in $OUT: summary.txt,
# logs.tar.gz, bench-*.json.
#
# Knobs: NETS="socket" (or "socket ucx")  COLLS="all_reduce all_gather reduce_scatter alltoall"
#        TYPES="float"  MAXB=256M  FACTOR=64 (sizes 64 B × FACTOR^k up to MAXB)  BUDGET=540
#        SPLIT=1M SMALLN=200: sizes below SPLIT run in their own step with 20 warm-up and SMALLN
#        timed iterations (with 3 and 20, a 64 B row was mostly warm-up: 2× apart between runs),
#        the rest with 3 and 20 (SMALLN=0: none below SPLIT; file bench-NET-COLL-TYPE-small.json and bench-NET-COLL-TYPE.json)
set -u
# shellcheck source=scripts/steps.sh
source "$(dirname "$0")/steps.sh"
BUDGET=${BUDGET:-540}
COLLS=${COLLS:-"all_reduce all_gather reduce_scatter alltoall"}
TYPES=${TYPES:-float}
MAXB=${MAXB:-256M}
FACTOR=${FACTOR:-64}
NETS=${NETS:-socket}
SPLIT=${SPLIT:-1M}
SMALLN=${SMALLN:-200}
# bytes N[KMG]: N in bytes.
bytes() { numfmt --from=iec "$1"; }
# The sizes of the run, 64 B × FACTOR^k up to MAXB, split at SPLIT.
small_max=0 large_min=0
for ((s = 64; s <= $(bytes "$MAXB"); s *= FACTOR)); do
  if [ "$s" -lt "$(bytes "$SPLIT")" ]; then small_max=$s; elif [ "$large_min" -eq 0 ]; then large_min=$s; fi
done
STEPS=$(for n in $NETS; do for c in $COLLS; do for t in $TYPES; do printf '%s-%s-%s ' "$n" "$c" "$t"; done; done; done)

# steps.sh keeps NVLink multicast off. Both libraries on sockets, over the same interface.
export NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_NET=Socket
IF=$(ip -o -4 addr show up 2>/dev/null | awk '$2 != "lo" {print $2; exit}')
export NCCL_SOCKET_IFNAME=${IF:-lo} WEFT_SOCKET_IFNAME=${IF:-lo}
{ date -u; hostname; nvidia-smi -L; nvidia-smi topo -m; ip -o -4 addr; echo "interface: ${IF:-lo}"; } >"$L/machine.txt" 2>&1
cat "$L/machine.txt"

for n in $NETS; do
  for c in $COLLS; do
    for t in $TYPES; do
      if [ "$small_max" -gt 0 ] && [ "$SMALLN" -gt 0 ]; then
        step "$n-$c-$t-small" 120 'grep -E "^ +(64|1024|4096|16384|262144) " $log | tr -s " " | cut -c1-100' -- \
          env WEFT_NET="$n" "$B/weft" run --nproc 2 --nodes 2 -- "$B/weft" bench "$c" -b 64 -e "$small_max" -f "$FACTOR" -w 20 -n "$SMALLN" -d "$t" \
          --hal nvlink --baseline nccl -J "$OUT/bench-$n-$c-$t-small.json"
      fi
      if [ "$large_min" -gt 0 ]; then
        step "$n-$c-$t" 120 'grep -E "^ +(1048576|4194304|16777216|67108864|268435456) " $log | tr -s " " | cut -c1-100' -- \
          env WEFT_NET="$n" "$B/weft" run --nproc 2 --nodes 2 -- "$B/weft" bench "$c" -b "$large_min" -e "$MAXB" -f "$FACTOR" -w 3 -n 20 -d "$t" \
          --hal nvlink --baseline nccl -J "$OUT/bench-$n-$c-$t.json"
      fi
    done
  done
done
save
echo "== summary =="
cat "$OUT/summary.txt"
exit "$nbad"
