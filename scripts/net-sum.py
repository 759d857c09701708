#!/usr/bin/env python3
"""net-sum.py DIR: one line per result of every `weft bench -J` file in DIR (out of place):
the file's name (the variant and collective), the size in bytes, weft's and the baseline's
time per call in microseconds, their ratio (baseline / weft: above 1, weft is faster) and
weft's wrong elements. The GPU scripts of docs/bench/2026-11-26k-h100x2/ ran it as
.gpuz/netsum.py."""
import glob
import json
import os
import sys


def main():
    for f in sorted(glob.glob(os.path.join(sys.argv[1], "*.json"))):
        name = os.path.basename(f)[:-5]
        try:
            d = json.load(open(f))
        except (OSError, ValueError) as e:
            print(name, "unreadable", e)
            continue
        for r in d.get("results", []):
            o = r["out_of_place"]
            b = r.get("baseline", {}).get("out_of_place", {})
            ratio = b.get("time", 0) / o["time"] if o["time"] else 0
            print(f"{name:28s} {r['size']:>6} weft {o['time']:8.1f} nccl {b.get('time', 0):8.1f} ratio {ratio:.2f} wrong {o['nwrong']}")


if __name__ == "__main__":
    main()
