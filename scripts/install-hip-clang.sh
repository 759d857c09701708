#!/usr/bin/env bash
# install-hip-clang.sh prints the path of a clang that compiles HIP device
# code for AMD GPUs (the amdgcn target, gfx942) without ROCm, installing
# Debian's clang-19 with apt-get when there is none. hal/xgmi's tests use it
# (WEFT_HIP_CLANG) to compile every plan kernel for MI300 and MI200; the
# Makefile's test target calls it. Idempotent; apt-get runs only when needed,
# through sudo when not root, and prints one line (its output goes to a log
# that is shown only when it fails). Honours WEFT_HIP_CLANG if set.
set -euo pipefail

# usable CLANG: lists the amdgcn target and compiles a gfx942 kernel.
usable() {
  "$1" -print-targets 2>/dev/null | grep -q amdgcn || return 1
  echo 'extern "C" __attribute__((global)) void k(int* p) { *p = 1; }' |
    "$1" -x hip --offload-arch=gfx942 -nogpulib -nogpuinc --cuda-device-only -S -o /dev/null - >/dev/null 2>&1
}

find_clang() {
  if [ -n "${WEFT_HIP_CLANG:-}" ]; then
    if usable "$WEFT_HIP_CLANG"; then echo "$WEFT_HIP_CLANG"; return 0; fi
    echo "install-hip-clang: WEFT_HIP_CLANG=$WEFT_HIP_CLANG cannot compile HIP for gfx942" >&2
    exit 1
  fi
  local c p
  for c in clang-19 clang-20 clang-18 clang; do
    p=$(command -v "$c" 2>/dev/null) || continue
    if usable "$p"; then echo "$p"; return 0; fi
  done
  return 1
}

find_clang && exit 0
if ! command -v apt-get >/dev/null 2>&1; then
  echo "install-hip-clang: no clang with the AMDGPU target (18 to 20) and no apt-get to install clang-19" >&2
  exit 1
fi
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
# One line while apt-get works; its output goes to a log, shown only when
# it fails.
log=$(mktemp "${TMPDIR:-/tmp}/install-hip-clang.XXXXXX.log")
echo "install-hip-clang: installing clang-19 with apt-get for hal/xgmi's tests (log: $log)" >&2
if ! { $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends clang-19; } >"$log" 2>&1; then
  echo "install-hip-clang: apt-get failed; the end of $log:" >&2
  tail -n 20 "$log" >&2
  exit 1
fi
rm -f "$log"
find_clang || { echo "install-hip-clang: clang-19 is installed but cannot compile HIP for gfx942" >&2; exit 1; }
