#!/usr/bin/env bash
# Call 9 (2026-11-27, 2×H100): LL puts over the network pushed before their packets are written,
# without a system fence (the proxy waits for the packets' flags: plan.TriggerLL), against the
# build before (pushed after the packets with a release store). 2 emulated nodes × 1 GPU, 64 B –
# 16 KB by 16, builds old/new alternated twice, NCCL's socket transport beside in every run.
# Here: .gpuz/x/{old,new}/weft, .gpuz/x/ucx (libucx0's libraries).
set -u
tar -xzf .gpuz/x.tgz -C .gpuz
X=.gpuz/x
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1; unset WEFT_NVLS
export NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_NET=Socket
export LD_LIBRARY_PATH=$PWD/$X/ucx:${LD_LIBRARY_PATH:-} UCX_MODULE_DIR=$PWD/$X/ucx/ucx
IF=$(ip -o -4 addr show up 2>/dev/null | awk '$2 != "lo" {print $2; exit}')
export NCCL_SOCKET_IFNAME=${IF:-lo} WEFT_SOCKET_IFNAME=${IF:-lo}
mkdir -p "$OUT/json"
T0=$SECONDS
one() { # round build net coll
  [ $((SECONDS - T0)) -gt ${BUDGET:-170} ] && { echo "budget: skip $*"; return; }
  WEFT_NET=$3 timeout 60 $X/$2/weft run --nproc 2 --nodes 2 -- $X/$2/weft bench $4 -b 64 -e 16K -f 16 -w 20 -n 200 -d float \
    --hal nvlink --baseline nccl -J "$OUT/json/r$1-$2-$3-$4.json" >"$OUT/json/r$1-$2-$3-$4.log" 2>&1
  echo "r$1 $2 $3 $4 rc $?"
}
for round in 1 2; do
  for b in old new; do
    for c in all_gather reduce_scatter all_reduce sendrecv broadcast; do one $round $b socket $c; done
    for c in all_gather reduce_scatter; do one $round $b ucx $c; done
  done
done
python3 scripts/net-sum.py "$OUT/json" >"$OUT/sum.txt"
grep -E " 64 " "$OUT/sum.txt" | sort -k1.4
grep -c "wrong 0" "$OUT/sum.txt"; grep -v "wrong 0" "$OUT/sum.txt" | head
