#!/usr/bin/env bash
# Call 7 (2026-11-27, 2×H100): the 2-rank copy-engine Reduce in an even number of equal windows
# (cereduce.go ceEvenWindow) against the build before (.gpuz/old.so: windows of 32 MiB, three at
# 96 MB, where call 6 measured 0.87× NCCL). cbench Reduce, float, root 0, CUDA graphs, 64 / 80 /
# 96 / 112 / 128 / 160 / 192 / 224 MB; NCCL, old, new, alternated twice. After `make gpu-bundle-four`.
set -u
tar -xzf .gpuz/bundle.tgz
export NCCL_NVLS_ENABLE=0; unset WEFT_NVLS
CB=examples/cbench/cbench
[ -x $CB ] || make -C examples/cbench CFLAGS='-O2 -Wall' >/dev/null 2>&1
W=(env WEFT_NCCL_FALLBACK=0 WEFT_DEBUG=WARN)
for i in 1 2; do
  for r in "64M 128M" "80M 160M" "96M 192M" "112M 224M"; do
    set -- $r
    A=(-g 2 -t reduce -d float -b $1 -e $2 -f 2 -w 3 -n 10 -G 5 -c 1 -p 0)
    env -u LD_PRELOAD NCCL_DEBUG=WARN $CB "${A[@]}" >"$OUT/nccl-$1-$i.log" 2>&1
    "${W[@]}" LD_PRELOAD=$PWD/.gpuz/old.so $CB "${A[@]}" >"$OUT/old-$1-$i.log" 2>&1
    "${W[@]}" LD_PRELOAD=$PWD/.gpu/libweft_nccl.so $CB "${A[@]}" >"$OUT/new-$1-$i.log" 2>&1
  done
done
for r in 64M 80M 96M 112M; do
  for i in 1 2; do python3 scripts/cbench-ratios.py "$OUT/nccl-$r-$i.log" "$OUT"/old-$r-?.log "$OUT"/new-$r-?.log; done
done >"$OUT/ratios.txt"
python3 - "$OUT/ratios.txt" <<'PY'
import sys, re
rows = {}
cur = None
for line in open(sys.argv[1]):
    m = re.match(r"== (old|new)-(\d+M)-\d\.log", line)
    if m: cur = m.group(1); hdr = None; continue
    if line.startswith("coll"): hdr = line.split()[1:]; continue
    if line.startswith("reduce") and cur:
        for s, v in zip(hdr, line.split()[1:]): rows.setdefault((s, cur), []).append(float(v))
for s in sorted({k[0] for k in rows}, key=lambda x: int(x[:-1])):
    o, n = rows.get((s, "old"), []), rows.get((s, "new"), [])
    print(f"{s:>5}  old {min(o):.3f}-{max(o):.3f}  new {min(n):.3f}-{max(n):.3f}")
PY
grep -h "wrong elements in all" "$OUT"/*.log | sort | uniq -c
