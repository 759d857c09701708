#!/usr/bin/env bash
# install-nvrtc.sh prints the path of an NVRTC library (NVIDIA's runtime
# compiler, libnvrtc) that channels' TestGeneratedKernelsNVRTC compiles the
# generated kernels with — no GPU or driver needed — installing Debian's
# libnvrtc11.2 (CUDA 11.8's NVRTC, in the non-free component) with apt-get
# when none is found. Honours WEFT_NVRTC_LIB if set. Prints nothing and
# exits 1 when there is none and it cannot install one; .ci/run then runs
# without it (the test skips). apt-get output goes to a log shown only on
# failure; through sudo when not root.
set -euo pipefail

if [ -n "${WEFT_NVRTC_LIB:-}" ]; then
  [ -e "$WEFT_NVRTC_LIB" ] && { echo "$WEFT_NVRTC_LIB"; exit 0; }
  echo "install-nvrtc: WEFT_NVRTC_LIB=$WEFT_NVRTC_LIB does not exist" >&2
  exit 1
fi

find_nvrtc() {
  local p
  p=$({ ldconfig -p 2>/dev/null || /sbin/ldconfig -p 2>/dev/null; } | awk '/libnvrtc\.so/ && !/builtins/ {print $NF; exit}')
  [ -n "$p" ] && [ -e "$p" ] && { echo "$p"; return 0; }
  for p in /usr/local/cuda/lib64/libnvrtc.so*; do
    [ -e "$p" ] && { echo "$p"; return 0; }
  done
  return 1
}

find_nvrtc && exit 0
command -v apt-get >/dev/null 2>&1 || { echo "install-nvrtc: no libnvrtc and no apt-get" >&2; exit 1; }
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
log=$(mktemp "${TMPDIR:-/tmp}/install-nvrtc.XXXXXX.log")
echo "install-nvrtc: installing Debian's libnvrtc11.2 (non-free) with apt-get (log: $log)" >&2
src=/etc/apt/sources.list.d/weft-nvrtc-nonfree.sources
codename=$(. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-bookworm}")
if ! apt-cache policy libnvrtc11.2 2>/dev/null | grep -q 'Candidate: [0-9]'; then
  printf 'Types: deb\nURIs: http://deb.debian.org/debian\nSuites: %s\nComponents: non-free\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
    "$codename" | $sudo tee "$src" >/dev/null
fi
if ! { $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends libnvrtc11.2 libnvrtc-builtins11.8; } >"$log" 2>&1; then
  echo "install-nvrtc: apt-get failed; the end of $log:" >&2
  tail -n 10 "$log" >&2
  exit 1
fi
rm -f "$log"
find_nvrtc
