#!/usr/bin/env bash
# Call 4 (2026-11-27, 4×H100): the network path's stream hazard under FSDP2 (docs/network.md,
# "Streams and the network path"), then the refusal that removes it. fsdp_step.py with 4 layers,
# 12 steps, median of the last 6, beside NCCL each time:
#   a: 2 emulated nodes × 2 GPUs, the build before (.gpuz/old.so), CUDA_DEVICE_MAX_CONNECTIONS
#      unset (call 3, with it at 1, timed out in the first AllGather);
#   b: the same with this build and CUDA_DEVICE_MAX_CONNECTIONS=1: the communicator is refused,
#      so the drop-in forwards it to NCCL (its log says served_by NCCL and why);
#   c: 2 emulated nodes × 1 GPU (GPUs 0-1), this build, CUDA_DEVICE_MAX_CONNECTIONS=1: every
#      rank alone on its node over sockets with host windows: weft serves every call.
# Run from the repository root after `make gpu-bundle-four` and the old library in .gpuz/old.so.
set -u
tar -xzf .gpuz/bundle.tgz
A=(FSDP_ARGS="--layers 4 --steps 12 --measure 6" STEP_LIMIT=150)
env "${A[@]}" OUT="$OUT/a" NP=4 STEPS="nccl weft-nodes2" NODES_CDMC= LIB=$PWD/.gpuz/old.so BUDGET=200 bash .gpu/gpu-fsdp.sh >"$OUT/a.txt" 2>&1
echo "== a rc $?"; tail -n 8 "$OUT/a.txt"
env "${A[@]}" OUT="$OUT/b" NP=4 STEPS="nccl weft-nodes2" BUDGET=120 bash .gpu/gpu-fsdp.sh >"$OUT/b.txt" 2>&1
echo "== b rc $?"; tail -n 8 "$OUT/b.txt"
env "${A[@]}" OUT="$OUT/c" NP=2 CUDA_VISIBLE_DEVICES=0,1 STEPS="nccl weft-nodes2" BUDGET=150 bash .gpu/gpu-fsdp.sh >"$OUT/c.txt" 2>&1
echo "== c rc $?"; tail -n 8 "$OUT/c.txt"
for x in a b c; do
  mkdir -p "/tmp/h$x" && tar -xzf "$OUT/$x/logs.tar.gz" -C "/tmp/h$x" 2>/dev/null
  echo "== $x: weft's init and failures"
  grep -h -o -E 'msg="weft: communicator (ready|init failed)"[^"]*"[^"]*"|served_by=[^ ]*( \(weft cannot[^)]*\))?|timed out[^"]{0,120}|"weft: (first|communicator destroyed)[^"]*"' /tmp/h$x/logs/fsdp-weft-nodes2.log 2>/dev/null | sort | uniq -c | head -12
done
