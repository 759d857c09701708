# steps.sh: time-boxed steps for the one-call GPU scripts (sourced right after `set -u`, from the
# repository root). It sets OUT (absolute; ./gpu-out unless OUT is set), ROOT, B (the bundle,
# $ROOT/.gpu), WORK (a fresh /tmp folder named after the script), L ($WORK/logs) and T0. The
# caller sets BUDGET and STEPS before its first step; save() writes $OUT/summary.txt and
# $OUT/logs.tar.gz.
# Never NVLink SHARP multicast on the GPU hosts (it can put a shared host's GPUs out of service
# for days): every script that sources this file has NCCL's, PyTorch's and NVSHMEM's multicast
# off and weft's WEFT_NVLS unset, whatever the caller's environment says.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
unset WEFT_NVLS
OUT=${OUT:-./gpu-out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
ROOT=$(pwd)
B=$ROOT/.gpu
WORK=$(mktemp -d "/tmp/$(basename "$0" .sh).XXXXXX")
L=$WORK/logs
mkdir -p "$L"
T0=$(date +%s)
rows=()
nbad=0
want() { case " $STEPS " in *" $1 "*) return 0;; esac; return 1; }
left() { echo $(( BUDGET - ($(date +%s) - T0) )); }
save() { # what comes back even if the device call is cut short
  printf '%s\n' "${rows[@]}" >"$OUT/summary.txt"
  tar -C "$WORK" -czf "$OUT/logs.tar.gz" --exclude='*.pt' logs 2>/dev/null
}
# step NAME LIMIT_S NOTE_CMD -- COMMAND...: runs COMMAND with a timeout of LIMIT_S (or what is left
# of the budget), its output in logs/NAME.log; NOTE_CMD (a shell snippet reading $log) gives the
# summary's note.
step() {
  local name=$1 limit=$2 note=$3; shift 4
  local log=$L/$name.log rem t0 rc res
  rem=$(left)
  if [ "$rem" -lt 20 ]; then
    rows+=("$(printf '%-20s %-7s %5s  %s' "$name" SKIPPED 0 "no time left in BUDGET=$BUDGET")")
    nbad=$((nbad + 1)); save; return 1
  fi
  [ "$limit" -gt "$rem" ] && limit=$rem
  echo "== $name (limit ${limit}s): $*" | tee -a "$L/steps.txt"
  t0=$(date +%s)
  timeout -k 10 "$limit" "$@" >"$log" 2>&1
  rc=$?
  case $rc in 0) res=ok;; 124|137) res=TIMEOUT;; *) res="FAIL($rc)";; esac
  [ "$rc" -ne 0 ] && nbad=$((nbad + 1))
  rows+=("$(printf '%-20s %-7s %5s  %s' "$name" "$res" $(( $(date +%s) - t0 )) "$(log=$log; eval "$note" 2>/dev/null | tr '\n' ' ' | cut -c1-110)")")
  tail -n 3 "$log" | sed "s/^/   /"
  save
  return $rc
}
