#!/usr/bin/env python3
"""Where a training step's GPU time goes, from torch.profiler chrome traces.

Reads the traces fsdp_step.py --profile PREFIX writes (PREFIX-rank0.json.gz), one per backend,
and prints for each:

  - per CUDA stream: kernels, busy time and the kernels that fill it;
  - the gaps of the compute stream (the stream with the most busy time): a gap whose next
    kernel was launched by the CPU only after the previous kernel had ended is "CPU-late" (the
    GPU waited for the host); any other gap is "waiting" (the kernel was queued but held back,
    by a stream wait on a collective's event or the like);
  - the CPU work that overlapped the CPU-late gaps, by operator;
  - the CUDA runtime and driver calls by total time.

Usage: trace_gaps.py NAME=TRACE.json.gz [NAME=TRACE.json.gz ...]
       e.g. trace_gaps.py nccl=prof-nccl-rank0.json.gz weft=prof-weft-rank0.json.gz

Times are of the profiled steps only (fsdp_step.py profiles the last three), in milliseconds.
"""
import collections
import gzip
import json
import sys


def load(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        return json.load(f)["traceEvents"]


def report(name, events):
    spans = [e for e in events if e.get("ph") == "X"]
    gpu = [e for e in spans if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    calls = [e for e in spans if e.get("cat") in ("cuda_runtime", "cuda_driver")]
    if not gpu:
        print(f"{name}: no GPU activity in the trace")
        return
    launch = {e["args"]["correlation"]: e for e in calls if "correlation" in e.get("args", {})}

    by_stream = collections.defaultdict(list)
    for e in gpu:
        by_stream[e["args"].get("stream")].append(e)
    t0 = min(e["ts"] for e in gpu)
    t1 = max(e["ts"] + e["dur"] for e in gpu)
    print(f"== {name}: GPU span {(t1 - t0) / 1e3:.2f} ms")
    busy = {s: sum(e["dur"] for e in l) for s, l in by_stream.items()}
    for s in sorted(by_stream, key=lambda s: -busy[s]):
        top = collections.Counter()
        for e in by_stream[s]:
            top[e["name"][:48]] += e["dur"]
        fill = ", ".join(f"{k} {v / 1e3:.1f}" for k, v in top.most_common(3))
        print(f"  stream {s}: {len(by_stream[s])} kernels, busy {busy[s] / 1e3:.2f} ms ({fill})")

    compute = max(busy, key=busy.get)
    ks = sorted(by_stream[compute], key=lambda e: e["ts"])
    late, waiting = [], []
    for a, b in zip(ks, ks[1:]):
        end = a["ts"] + a["dur"]
        gap = b["ts"] - end
        if gap <= 5:  # µs: back-to-back launches
            continue
        call = launch.get(b["args"].get("correlation"))
        (late if call and call["ts"] + call["dur"] > end else waiting).append((end, b["ts"]))
    total = lambda gaps: sum(g1 - g0 for g0, g1 in gaps) / 1e3
    print(f"  compute stream {compute} gaps: CPU-late {total(late):.2f} ms ({len(late)}), "
          f"waiting {total(waiting):.2f} ms ({len(waiting)})")

    cpu = [e for e in spans if e.get("cat") in ("cpu_op", "user_annotation")]
    over = collections.Counter()
    for g0, g1 in late:
        for e in cpu:
            o = min(e["ts"] + e["dur"], g1) - max(e["ts"], g0)
            if o > 0:
                over[e["name"][:56]] += o
    if over:
        print("  CPU work overlapping the CPU-late gaps (ms):")
        for k, v in over.most_common(10):
            print(f"    {k:<56} {v / 1e3:7.2f}")

    api = collections.defaultdict(lambda: [0, 0])
    for e in calls:
        api[e["name"]][0] += e["dur"]
        api[e["name"]][1] += 1
    print("  CUDA API calls (ms, calls):")
    for k, (d, n) in sorted(api.items(), key=lambda x: -x[1][0])[:8]:
        print(f"    {k:<40} {d / 1e3:8.2f} {n:6d}")


def main(args):
    if not args or any("=" not in a for a in args):
        sys.exit(__doc__)
    for a in args:
        name, path = a.split("=", 1)
        report(name, load(path))


if __name__ == "__main__":
    main(sys.argv[1:])
