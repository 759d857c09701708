#!/usr/bin/env python3
"""One FSDP2 training step, timed: a bf16 MLP stack sharded per layer with fully_shard, AdamW.

    torchrun --nproc-per-node 2 examples/torch/fsdp_step.py --out nccl.json           # real NCCL
    LD_PRELOAD=$PWD/.gpu/libweft_nccl.so \\
      torchrun --nproc-per-node 2 examples/torch/fsdp_step.py --out weft.json         # weft's drop-in
    WEFT_MAX_CTAS=16 LD_PRELOAD=... torchrun ... --out weft16.json                    # weft, SM budget
    python3 examples/torch/fsdp_step.py --compare nccl.json weft.json                 # losses bit for bit

The model is --layers blocks of Linear(dim, hidden) -> GELU -> Linear(hidden, dim), with biases,
in bfloat16 (default 8 x 4096 -> 16384 -> 4096: 1.07 B parameters, 2.15 GB of bf16), every
block and the root wrapped by torch.distributed.fsdp.fully_shard (FSDP2): per step each block's
parameters are all-gathered in the forward pass and again in the backward pass (reshard after
forward), its gradients reduce-scattered, and the loss all-reduced, so on 8 blocks a step makes
16 AllGathers, 8 ReduceScatters and 1 AllReduce, each overlapping the GEMMs of its neighbours.
Each rank feeds its own batch of --batch x --seq tokens (default 4 x 1024) drawn from fixed
seeds; the target comes from a fixed random teacher projection. cuBLAS runs in deterministic
mode, so two runs whose collectives return the same bits give the same losses bit for bit (two
ranks: a + b is the only order of a sum).

Timing: every step ends with the loss all-reduce read back on the host (.item(), which
synchronises the stream); the step time is the wall time between step ends. The reported figure
is the median of the last --measure steps of --steps (default 20 of 30); the first steps build
NCCL's or weft's communicators and compile weft's kernels.

Backend: "weft" when libweft_nccl.so is mapped into the process (LD_PRELOAD, or the NCCL library
path pointing at it), else "nccl"; weft's own log (NCCL_DEBUG=INFO) says per communicator which
calls it served and forwarded (scripts/gpu-fsdp.sh reads it).

Output: rank 0 prints one line per step and a summary line
    "# fsdp backend=weft params=1073905664 median_ms=61.04 steps=30 measure=20 ..."
and writes --out (JSON: meta, losses and a checksum of every rank's parameter shards after the
last step, as float.hex strings, step times). --compare checks losses and checksums bit for bit.
Exit status 1 when a loss is not finite.
"""
import argparse
import datetime
import gzip
import json
import math
import os
import statistics
import sys
import time


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default="fsdp_step.json")
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--dim", type=int, default=4096)
    p.add_argument("--hidden", type=int, default=16384)
    p.add_argument("--batch", type=int, default=4, help="sequences per rank")
    p.add_argument("--seq", type=int, default=1024, help="tokens per sequence")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--measure", type=int, default=20, help="the median is over the last MEASURE steps")
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--timeout", type=float, default=300, help="process group timeout in seconds")
    p.add_argument("--profile", metavar="PREFIX",
                   help="profile the last 3 steps with torch.profiler: PREFIX-rankN.txt (kernels by GPU time) "
                        "and PREFIX-rank0.json.gz (rank 0's trace, for chrome://tracing or Perfetto)")
    p.add_argument("--compare", nargs="+", metavar="JSON",
                   help="compare the losses of the first file with each other file, bit for bit, and exit")
    return p.parse_args()


def load(path):
    with open(path) as f:
        return json.load(f)


def compare(paths):
    """Bit-for-bit comparison of the first run's losses with each other run's; 0 when all match."""
    ref = load(paths[0])
    rc = 0
    for path in paths[1:]:
        other = load(path)
        a, b = ref["losses"], other["losses"]
        same = sum(1 for x, y in zip(a, b) if x == y)
        first = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), None)
        ca, cb = ref["meta"].get("shard_checksums"), other["meta"].get("shard_checksums")
        ok = len(a) == len(b) and same == len(a) and ca == cb
        rc |= 0 if ok else 1
        where = "" if first is None else f"; first difference at step {first}: {float.fromhex(a[first]):.9g} vs {float.fromhex(b[first]):.9g}"
        sums = "parameter shards identical" if ca == cb else f"parameter shard checksums differ ({ca} vs {cb})"
        print(f"{'identical' if ok else 'DIFFER'}: {path} vs {paths[0]}: {same}/{max(len(a), len(b))} losses bit-identical, "
              f"{sums}{where}")
    return rc


def weft_mapped():
    """The path of libweft_nccl.so if this process has it mapped, else ""."""
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                if "libweft_nccl" in line:
                    return line.split()[-1]
    except OSError:
        pass
    return ""


def main():
    args = parse_args()
    if args.compare:
        sys.exit(compare(args.compare))
    if args.measure < 1 or args.measure > args.steps:
        sys.exit(f"--measure {args.measure}: want 1 to --steps ({args.steps})")
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    try:
        from torch.distributed.fsdp import fully_shard  # PyTorch 2.6 and later
    except ImportError:
        from torch.distributed._composable.fsdp import fully_shard  # 2.4, 2.5

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local = int(os.environ.get("LOCAL_RANK", rank))
    torch.cuda.set_device(local)
    dev = torch.device("cuda", local)
    dist.init_process_group(backend="nccl", device_id=dev, timeout=datetime.timedelta(seconds=args.timeout))
    # Deterministic GEMMs (CUBLAS_WORKSPACE_CONFIG above); warn_only: an op of FSDP2 without a
    # deterministic variant warns rather than stops the run.
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.backends.cuda.matmul.allow_tf32 = False

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.up = nn.Linear(args.dim, args.hidden)
            self.down = nn.Linear(args.hidden, args.dim)

        def forward(self, x):
            return self.down(nn.functional.gelu(self.up(x)))

    t_build = time.time()
    torch.manual_seed(args.seed)  # the same initial parameters on every rank
    with torch.device(dev):
        model = nn.Sequential(*[Block() for _ in range(args.layers)]).to(torch.bfloat16)
    nparams = sum(p.numel() for p in model.parameters())
    for block in model:
        fully_shard(block)
    fully_shard(model)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr)

    g = torch.Generator(device=dev).manual_seed(args.seed + 1)
    teacher = torch.randn(args.dim, args.dim, device=dev, generator=g, dtype=torch.bfloat16) / math.sqrt(args.dim)
    gd = torch.Generator(device=dev).manual_seed(args.seed + 100 + rank)
    x = torch.randn(args.batch, args.seq, args.dim, device=dev, generator=gd, dtype=torch.bfloat16)
    y = torch.tanh(x @ teacher)
    torch.cuda.synchronize()
    build_s = time.time() - t_build

    losses, times = [], []
    prof = None
    last = time.perf_counter()
    for step in range(args.steps):
        if args.profile and step == args.steps - 3:
            # The last three steps: their times are still measured (the profiler adds a little
            # CPU time per op; compare profiled runs with profiled runs).
            prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                                      torch.profiler.ProfilerActivity.CUDA])
            prof.__enter__()
        opt.zero_grad(set_to_none=True)
        loss = nn.functional.mse_loss(model(x).float(), y.float())
        loss.backward()
        opt.step()
        glob = loss.detach().clone()
        dist.all_reduce(glob, op=dist.ReduceOp.AVG)
        v = glob.item()  # synchronises: the step is done
        now = time.perf_counter()
        times.append((now - last) * 1e3)
        last = now
        losses.append(v)
        if prof is not None and step == args.steps - 1:
            prof.__exit__(None, None, None)
            with open(f"{args.profile}-rank{rank}.txt", "w") as f:
                f.write(prof.key_averages().table(sort_by="device_time_total", row_limit=40, max_name_column_width=90))
            if rank == 0:
                prof.export_chrome_trace(f"{args.profile}-rank0.json")
                with open(f"{args.profile}-rank0.json", "rb") as src, gzip.open(f"{args.profile}-rank0.json.gz", "wb") as dst:
                    dst.write(src.read())
                os.remove(f"{args.profile}-rank0.json")
        if rank == 0:
            print(f"step {step:3d} loss {v:.9g} ({v.hex()}) {times[-1]:8.2f} ms", flush=True)

    # A checksum of each rank's parameter shards after the last step: equal between two runs
    # when every update was.
    csum = torch.tensor([sum(float(p.to_local().double().sum()) if hasattr(p, "to_local") else float(p.double().sum())
                             for p in model.parameters())], device=dev, dtype=torch.float64)
    sums = [torch.zeros_like(csum) for _ in range(world)]
    dist.all_gather(sums, csum)
    median = statistics.median(times[-args.measure:])
    rc = 0
    if rank == 0:
        lib = weft_mapped()
        backend = "weft" if lib else "nccl"
        meta = {"torch": torch.__version__, "nccl_version": ".".join(map(str, torch.cuda.nccl.version())),
                "backend": backend, "weft_lib": lib, "preload": os.environ.get("LD_PRELOAD", ""),
                "world": world, "device": torch.cuda.get_device_name(dev), "params": nparams,
                "layers": args.layers, "dim": args.dim, "hidden": args.hidden, "batch": args.batch, "seq": args.seq,
                "steps": args.steps, "measure": args.measure, "median_ms": round(median, 3), "build_s": round(build_s, 2),
                "budget": {k: os.environ[k] for k in ("WEFT_MAX_CTAS", "WEFT_MIN_CTAS", "NCCL_MAX_CTAS", "NCCL_MIN_CTAS")
                           if os.environ.get(k)},
                "shard_checksums": [float(s).hex() for s in sums]}
        with open(args.out, "w") as f:
            json.dump({"meta": meta, "losses": [v.hex() for v in losses], "step_ms": times}, f, indent=1)
        if not all(math.isfinite(v) for v in losses):
            print("FAIL: a loss is not finite")
            rc = 1
        elif losses[-1] >= losses[0]:
            print(f"note: the loss did not decrease ({losses[0]:.6g} -> {losses[-1]:.6g}); the timing stands")
        budget = " ".join(f"{k}={v}" for k, v in meta["budget"].items()) or "none"
        print(f"# fsdp backend={backend} params={nparams} median_ms={median:.2f} steps={args.steps} measure={args.measure} "
              f"budget={budget} loss {losses[0]:.6g} -> {losses[-1]:.6g} build_s={build_s:.1f} wrote {args.out}", flush=True)
    dist.destroy_process_group()
    sys.exit(rc)


if __name__ == "__main__":
    main()
