#!/usr/bin/env bash
# shm-check.sh: lists weft's shared-memory files (/dev/shm, or WEFT_SHM_DIR) whose creating
# process is gone, and exits 1 if there is any. CI runs it after the tests (.ci/run): the
# killed-rank, SIGSTOP and interrupted-launcher tests must leave no file of a dead process.
# Names are PREFIX-PID-START-NS-… (internal/shm): a creator is gone when no process PID runs
# or the one that does started at another time (field 22 of /proc/PID/stat). Files of other
# users and of other pid namespaces are not judged.
set -u
dir=${WEFT_SHM_DIR:-/dev/shm}
myns=$(stat -L -c %i /proc/self/ns/pid 2>/dev/null || echo 0)
dead=0
for f in "$dir"/weft-*; do
  [ -f "$f" ] && [ -O "$f" ] || continue
  name=${f##*/}
  rest=${name#weft-}
  rest=${rest#pcie-}
  IFS=- read -r pid start ns _ <<<"$rest"
  case "$pid$start$ns" in *[!0-9]*|"") continue;; esac
  [ "$ns" = "$myns" ] || continue
  now=$(awk '{sub(/^.*\) /, ""); print $20}' "/proc/$pid/stat" 2>/dev/null)
  if [ "$now" != "$start" ]; then
    echo "shm-check: $f: creator pid $pid (started at tick $start) is gone"
    dead=$((dead + 1))
  fi
done
echo "shm-check: $dead weft file(s) of dead processes in $dir"
[ "$dead" -eq 0 ]
