#!/usr/bin/env bash
# Threads × unroll × blocks sweep of the 2PA AllReduce at large sizes (no
# baseline), to choose algorithms.DefaultConfig. Prints one line per size.
set -u
OUT=${OUT:-./gpu-out}
export NCCL_NVLS_ENABLE=0
N=$(nvidia-smi -L | wc -l)
# CONFIGS: "blocks threads unroll" triples separated by commas.
IFS=, read -ra cfgs <<<"${CONFIGS:-64 1024 2,64 1024 4,64 512 4,32 1024 4,128 512 4}"
for cfg in "${cfgs[@]}"; do
  set -- $cfg
  log="$OUT/tune-b$1-t$2-u$3.log"
  .gpu/weft bench allreduce -b ${TUNE_MIN:-8M} -e ${TUNE_MAX:-512M} -f ${TUNE_F:-4} -G 20 -c 0 -w 3 --nproc "$N" --hal nvlink --blocks "$1" --threads "$2" --unroll "$3" >"$log" 2>&1
  echo "blocks=$1 threads=$2 unroll=$3 (rc=$?)"; grep -E '^ +[0-9]' "$log" | awk '{printf "  %11s  oop %8s us %7s GB/s   ip %8s us %7s GB/s\n", $1, $6, $8, $10, $12}'
done
