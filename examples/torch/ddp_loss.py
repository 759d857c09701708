#!/usr/bin/env python3
"""DDP training of a small deterministic MLP; the loss curve of two runs can be compared.

    torchrun --nproc-per-node 2 examples/torch/ddp_loss.py --out nccl.json
    LD_PRELOAD=$PWD/.gpu/libweft_nccl.so torchrun --nproc-per-node 2 examples/torch/ddp_loss.py --out weft.json
    python3 examples/torch/ddp_loss.py --compare nccl.json weft.json --rtol 1e-3

Every rank draws its own shard of a synthetic regression problem from fixed seeds, the model
is built from one seed on every rank (DDP still broadcasts rank 0's parameters), gradients go
through DDP's bucketed all-reduce (small buckets, so several all-reduces per step), and rank 0
records the global mean loss of every step (an all-reduce of the per-rank losses over n). cuBLAS
and cuDNN are put in deterministic mode, so two runs through the same NCCL give the same
curve bit for bit, and runs through two implementations differ only by the order in which
each sums the gradients (none with two ranks, since a+b == b+a).
"""
import argparse
import datetime
import json
import math
import os
import sys
import time


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default="ddp_loss.json")
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--dtype", choices=["fp32", "bf16"], default="fp32",
                   help="bf16: parameters, gradients and so the all-reduces in bfloat16")
    p.add_argument("--hidden", type=int, default=1024)
    p.add_argument("--batch", type=int, default=256, help="per rank")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--bucket-mb", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--compare", nargs=2, metavar=("A", "B"))
    p.add_argument("--rtol", type=float, default=1e-3, help="largest relative difference of a step's loss")
    return p.parse_args()


def compare(a, b, rtol):
    A, B = json.load(open(a)), json.load(open(b))
    la, lb = A["losses"], B["losses"]
    print(f"A: {a} {A.get('meta')}\nB: {b} {B.get('meta')}")
    if len(la) != len(lb):
        print(f"FAIL: {len(la)} steps in A, {len(lb)} in B")
        return 1
    worst, at = 0.0, 0
    for i, (x, y) in enumerate(zip(la, lb)):
        d = abs(x - y) / max(abs(x), abs(y), 1e-12)
        if not (d <= worst):  # also catches NaN
            worst, at = d, i
    for i in sorted({0, 1, len(la) // 2, len(la) - 1, max(at, 0)}):
        print(f"step {i:4d}  A {la[i]:.8g}  B {lb[i]:.8g}  rel {abs(la[i] - lb[i]) / max(abs(la[i]), 1e-12):.3g}")
    identical = sum(1 for x, y in zip(la, lb) if x == y)
    ok = worst <= rtol and not math.isnan(worst)
    print(f"{'ok' if ok else 'FAIL'}: max relative difference {worst:.3g} at step {at} (rtol {rtol}); "
          f"{identical}/{len(la)} steps bit-identical")
    return 0 if ok else 1


def main():
    args = parse_args()
    if args.compare:
        sys.exit(compare(*args.compare, args.rtol))
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    from torch.nn.parallel import DistributedDataParallel as DDP

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local = int(os.environ.get("LOCAL_RANK", rank))
    cpu = bool(os.environ.get("DDP_CPU"))  # development only: gloo on the CPU
    if cpu:
        dev = torch.device("cpu")
        dist.init_process_group(backend="gloo", timeout=datetime.timedelta(seconds=120))
    else:
        torch.cuda.set_device(local)
        dev = torch.device("cuda", local)
        dist.init_process_group(backend="nccl", device_id=dev, timeout=datetime.timedelta(seconds=120))
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.benchmark = False
    torch.backends.cuda.matmul.allow_tf32 = False
    dtype = torch.float32 if args.dtype == "fp32" else torch.bfloat16

    d_in, h, d_out = 64, args.hidden, 16
    torch.manual_seed(args.seed)
    model = nn.Sequential(nn.Linear(d_in, h), nn.GELU(), nn.Linear(h, h), nn.GELU(), nn.Linear(h, d_out))
    model = model.to(device=dev, dtype=dtype)
    ddp = DDP(model, device_ids=None if cpu else [local], bucket_cap_mb=args.bucket_mb)
    opt = torch.optim.SGD(ddp.parameters(), lr=args.lr, momentum=0.9)

    # A fixed teacher makes a learnable target; each rank has its own data shard.
    g = torch.Generator(device="cpu").manual_seed(args.seed + 1)
    teacher = torch.randn(d_in, d_out, generator=g) / math.sqrt(d_in)
    gd = torch.Generator(device="cpu").manual_seed(args.seed + 100 + rank)
    X = torch.randn(args.steps, args.batch, d_in, generator=gd)
    Y = torch.tanh(X @ teacher) + 0.01 * torch.randn(args.steps, args.batch, d_out, generator=gd)
    X, Y = X.to(dev, dtype), Y.to(dev, dtype)

    losses, t0 = [], time.time()
    for step in range(args.steps):
        opt.zero_grad(set_to_none=True)
        loss = nn.functional.mse_loss(ddp(X[step]).float(), Y[step].float())
        loss.backward()
        opt.step()
        glob = loss.detach().clone()
        dist.all_reduce(glob)
        v = glob.item() / world
        losses.append(v)
        if rank == 0:
            print(f"step {step:4d} loss {v:.8f}", flush=True)
    elapsed = time.time() - t0

    # Parameters must be identical on every rank after DDP: compare a checksum through the store.
    csum = sum(float(p.detach().double().sum()) for p in model.parameters())
    store = dist.distributed_c10d._get_default_store()
    store.set(f"ddp_csum/{rank}", repr(csum))
    rc = 0
    if rank == 0:
        sums = [float(store.get(f"ddp_csum/{s}")) for s in range(world)]
        same = all(s == sums[0] for s in sums)
        if not same:
            rc = 1
        meta = {"torch": torch.__version__, "nccl_version": "gloo" if cpu else ".".join(map(str, torch.cuda.nccl.version())),
                "world": world, "dtype": args.dtype, "steps": args.steps, "preload": os.environ.get("LD_PRELOAD", ""),
                "seconds": round(elapsed, 3), "param_checksums": sums}
        json.dump({"meta": meta, "losses": losses}, open(args.out, "w"), indent=1)
        drop = losses[0] - losses[-1]
        if not all(math.isfinite(x) for x in losses) or drop <= 0:
            print("FAIL: the loss did not decrease or is not finite")
            rc = 1
        print(f"# {args.steps} steps in {elapsed:.2f}s, loss {losses[0]:.6f} -> {losses[-1]:.6f}; "
              f"parameters {'identical' if same else 'DIFFER'} on all ranks; wrote {args.out}", flush=True)
    dist.destroy_process_group()
    sys.exit(rc)


if __name__ == "__main__":
    main()
