#!/usr/bin/env bash
# Call 1 (2026-11-27, 2-GPU host): polling loops that yield rarely (internal/spin) against the
# build before (a runtime.Gosched after every 64 polls in the proxy's hot loop, every poll in
# hal/ucx's loops). First lb (call1/lb.go, CPU only): one loopback hop beside K polling
# goroutines. Then 2 emulated nodes × 1 GPU over sockets and UCX, 64 B – 4 MB by 16, builds
# old/new alternated twice, NCCL's socket transport beside in every run.
# Here: .gpuz/x/{old,new}/weft, .gpuz/x/lb, .gpuz/x/ucx (libucx0's libraries).
set -u
tar -xzf .gpuz/x.tgz -C .gpuz
X=.gpuz/x
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1; unset WEFT_NVLS
export NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_NET=Socket
export LD_LIBRARY_PATH=$PWD/$X/ucx:${LD_LIBRARY_PATH:-} UCX_MODULE_DIR=$PWD/$X/ucx/ucx
IF=$(ip -o -4 addr show up 2>/dev/null | awk '$2 != "lo" {print $2; exit}')
export NCCL_SOCKET_IFNAME=${IF:-lo} WEFT_SOCKET_IFNAME=${IF:-lo}
mkdir -p "$OUT/json"
{ date -u; nproc; nvidia-smi -L; echo "interface ${IF:-lo}"; } >"$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt"
{
  for m in "quiet 0" "gosched 2" "rare 2" "gosched 6" "rare 6" "quiet 0" "bidir 0"; do $X/lb $m; done
} >"$OUT/lb.txt" 2>&1
cat "$OUT/lb.txt"
T0=$SECONDS
for round in 1 2; do
  for b in old new; do
    for net in socket ucx; do
      for c in all_gather reduce_scatter all_reduce sendrecv broadcast; do
        [ $((SECONDS - T0)) -gt ${BUDGET:-330} ] && { echo "budget: stop before $round $b $net $c"; break 4; }
        WEFT_NET=$net timeout 60 $X/$b/weft run --nproc 2 --nodes 2 -- $X/$b/weft bench $c -b 64 -e 4M -f 16 -w 20 -n 200 -d float \
          --hal nvlink --baseline nccl -J "$OUT/json/r$round-$b-$net-$c.json" >"$OUT/json/r$round-$b-$net-$c.log" 2>&1
        echo "r$round $b $net $c rc $?"
      done
    done
  done
done
python3 scripts/net-sum.py "$OUT/json" >"$OUT/sum.txt"
cat "$OUT/sum.txt"
