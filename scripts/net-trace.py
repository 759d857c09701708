#!/usr/bin/env python3
"""Join the timelines of WEFT_PROXY_TRACE (one weft-trace-PID.txt per process) into the path of
every hop of the socket transport (frames) or of hal/ucx (active messages), and print the median (and p90) of each leg, in µs.

usage: scripts/net-trace.py DIR [--skip N]

Legs, for each frame matched between its writer and its reader by (engine id, sequence number):
  trigger→write   the proxy saw the trigger whose handling wrote the frame → the write began
  write           the write call (writev), whole
  write→read      the write ended → the reader saw the frame's first byte (wire and wake-up)
  read+apply      the reader saw the first byte → the frame was applied (semaphore stored)
  hop             the proxy saw the trigger → the frame was applied at the peer
and for each rank, between its own events:
  applied→next trigger   a data frame (a put: an LL put carries its completion; put-with-signal or signal) applied → the next trigger this
                         rank's proxy saw (the kernel saw the semaphore, copied out, pushed)
  trigger→trigger        consecutive triggers of a rank by kind pair (e.g. signal→put: a launch's
                         release to the next launch's put)
The clock is the wall clock, which the processes of one host share. --skip drops each file's
first N events (set-up).
"""
import collections
import glob
import os
import statistics
import sys

KIND = {1: "put", 2: "signal", 3: "bye", 4: "put+signal",  # hal/socket frames
        17: "ucx signal", 18: "ucx ranges", 19: "ucx put+signal"}  # hal/ucx messages (16 + kind)
TRIG = {1: "put", 2: "copy", 3: "signal", 4: "flush", 5: "counter"}


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))]


def show(name, xs):
    if not xs:
        return
    print(f"  {name:34s} n={len(xs):6d}  p50 {statistics.median(xs)/1e3:8.2f}  p90 {pct(xs, 0.9)/1e3:8.2f}")


def main():
    args = sys.argv[1:]
    skip = 0
    if "--skip" in args:
        i = args.index("--skip")
        skip = int(args[i + 1])
        del args[i:i + 2]
    if len(args) != 1:
        sys.exit(__doc__)
    events = []
    for path in sorted(glob.glob(os.path.join(args[0], "weft-trace-*.txt"))):
        rows = [l.split() for l in open(path) if not l.startswith("#")]
        for r in rows[skip:]:
            events.append((r[0], int(r[1]), int(r[2]), int(r[3]), int(r[4]), int(r[5]), int(r[6])))
    if not events:
        sys.exit("no events")
    writes = {(e[4], e[5]): e for e in events if e[0] == "write"}
    triggers = collections.defaultdict(list)  # rank -> [(start, end, kind)]
    for e in events:
        if e[0] == "trigger":
            triggers[e[1]].append((e[2], e[3], e[4]))
    for r in triggers:
        triggers[r].sort()
    legs = collections.defaultdict(lambda: collections.defaultdict(list))
    applied = collections.defaultdict(list)  # rank -> [end of a data frame's apply]
    for e in events:
        if e[0] != "read":
            continue
        w = writes.get((e[4], e[5]))
        if w is None:
            continue
        kind = KIND.get(e[6] & 0xFF, str(e[6] & 0xFF))
        L = legs[kind]
        L["write"].append(w[3] - w[2])
        L["write→read"].append(e[2] - w[3])
        L["read+apply"].append(e[3] - e[2])
        # the trigger whose handling wrote it: on the writer's rank, started before the write
        # began and ended after it ended
        for ts, te, tk in reversed(triggers.get(w[1], [])):
            if ts <= w[2] and te >= w[3]:
                L["trigger→write"].append(w[2] - ts)
                L["hop"].append(e[3] - ts)
                break
        if kind in ("put", "put+signal", "signal", "ucx signal", "ucx put+signal"):
            applied[e[1]].append((e[3], kind))
    for kind in sorted(legs):
        print(f"frames: {kind}")
        for name in ("trigger→write", "write", "write→read", "read+apply", "hop"):
            show(name, legs[kind][name])
    for r in sorted(triggers):
        ts = triggers[r]
        starts = [t[0] for t in ts]
        print(f"rank {r}")
        nxt = collections.defaultdict(list)
        import bisect
        for t, kind in applied.get(r, []):
            i = bisect.bisect_left(starts, t)
            if i < len(ts):
                nxt[f"{kind} applied→next trigger ({TRIG.get(ts[i][2])})"].append(ts[i][0] - t)
        for name in sorted(nxt):
            show(name, nxt[name])
        pairs = collections.defaultdict(list)
        for a, b in zip(ts, ts[1:]):
            pairs[f"trigger {TRIG.get(a[2])}→{TRIG.get(b[2])}"].append(b[0] - a[0])
        for name in sorted(pairs):
            show(name, pairs[name])


if __name__ == "__main__":
    main()
