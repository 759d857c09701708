#!/usr/bin/env python3
"""Compare cbench's out-of-place times with `weft bench` (or another cbench run) size by size.

    python3 examples/cbench/compare.py cbench-weft.log bench-all_reduce.log bench-all_gather.log ... [--tol 0.05]

Each file may hold several collectives: cbench prints '# <collective>' before its rows, weft
bench '# weft bench <collective>'. Rows are matched by collective (underscores ignored) and
size; the ratio is A's time / B's time, where A is the first file and B the others. Exit status
1 if any ratio is off by more than --tol (time above (1+tol) x B's), 0 otherwise; sizes present
in one side only are listed but not judged.
"""
import argparse
import re
import sys


def parse(path):
    out, coll = {}, None
    for line in open(path, errors="replace"):
        m = re.match(r"#\s*(?:weft bench\s+|cbench\s+)?([a-z_]+)\s*$", line) or \
            re.match(r"#\s*weft bench\s+([a-z_]+)\b", line)
        if m and m.group(1).replace("_", "") in {"allreduce", "allgather", "reducescatter", "broadcast",
                                                   "reduce", "alltoall", "sendrecv"}:
            coll = m.group(1).replace("_", "")
            continue
        f = line.split()
        if coll and len(f) > 5 and f[0].isdigit() and f[1].isdigit():
            try:
                out[(coll, int(f[0]))] = float(f[5])
            except ValueError:
                pass
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("a")
    p.add_argument("b", nargs="+")
    p.add_argument("--tol", type=float, default=0.05)
    args = p.parse_args()
    A, B = parse(args.a), {}
    for f in args.b:
        B.update(parse(f))
    bad = 0
    print(f"# {args.a} (A) vs {' '.join(args.b)} (B): out-of-place time in us")
    print(f"# {'collective':<14} {'size(B)':>12} {'A':>10} {'B':>10} {'A/B':>7}")
    for key in sorted(set(A) | set(B)):
        a, b = A.get(key), B.get(key)
        if a is None or b is None:
            continue
        r = a / b if b > 0 else float("inf")
        flag = "" if r <= 1 + args.tol else "  > tol"
        bad += bool(flag)
        print(f"  {key[0]:<14} {key[1]:>12} {a:>10.2f} {b:>10.2f} {r:>7.3f}{flag}")
    common = len(set(A) & set(B))
    print(f"compare: {common} sizes in both, {bad} with A more than {args.tol:.0%} slower than B")
    sys.exit(1 if bad or not common else 0)


if __name__ == "__main__":
    main()
