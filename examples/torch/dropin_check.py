#!/usr/bin/env python3
"""Checks every collective PyTorch reaches through libnccl, eagerly and under CUDA graphs.

Run on a GPU host, one process per GPU:

    torchrun --nproc-per-node 2 examples/torch/dropin_check.py            # real NCCL (reference)
    LD_PRELOAD=$PWD/.gpu/libweft_nccl.so \
      torchrun --nproc-per-node 2 examples/torch/dropin_check.py          # weft's drop-in

    ... --dump ref.pt / --dump weft.pt, then
    python3 examples/torch/dropin_check.py --compare ref.pt weft.pt

Inputs. Rank s, element i, tag t (a tag per check and per graph replay) holds the small integer
    v(s, i, t) = (7i + 13s + 5t + 3) mod 17 - 8              (in [-8, 8])
and, in int64, additionally ((5i + 3s + t) mod 4) * 2^40, so that every byte of an 8-byte
element is exercised and MAX picks a different rank from element to element. For AVG in an
integer type every rank's input is multiplied by the number of ranks n, so the integer
quotient is exact whatever rounding an implementation uses. Every result therefore has a
closed form computed here in int64/float64 from the same formula for every rank.

Tolerance. Integer types must be exact. Sums and maxima of these integer-valued floats are
exact in float32, bfloat16 and float16 too (|sum| <= 8n), whatever the reduction order. Where
a factor enters (AVG = sum/n, PREMUL_SUM = sum of f*x), each element may differ from the
closed form by at most
    tol = (n + 1) * eps * sum_s |f * x_s|
with eps the machine epsilon of the type (2^-23 float32, 2^-10 float16, 2^-7 bfloat16) and f
the factor rounded to the type: one rounding per product, n-1 per sum, one on output. The
PREMUL_SUM host factor is the float32 0x3F003F00 (0.50096...): its bfloat16 rounding and its
low two bytes read as a bfloat16 are both 0.5, so the check does not depend on which of the
two ways an implementation reads PyTorch's float scalar for bfloat16. --compare between two
runs requires integer outputs to be bit-identical and floats within 2*tol of each other.

Output: one line per check (name, dtype, count, mode, ok/FAIL/skip, max error), then
"N passed, N failed, N skipped"; the exit status is 1 if any check failed on any rank.
"""
import argparse
import datetime
import glob
import json
import math
import os
import re
import struct
import sys
import threading
import time
import traceback

BIG = 1 << 40
PREMUL_HOST = struct.unpack("<f", struct.pack("<I", 0x3F003F00))[0]
DEV_FACTORS = [0.25, 0.5, 2.0, 4.0]


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dump", help="write sampled results to PATH (one file per rank: PATH with .rankR before the suffix)")
    p.add_argument("--compare", nargs=2, metavar=("A", "B"), help="compare two --dump results and exit")
    p.add_argument("--sizes", default="1,1023,262147", help="element counts for every check (per rank)")
    p.add_argument("--graph-sizes", default="1023,262147", help="element counts for the CUDA graph checks")
    p.add_argument("--large", type=int, default=16 * 1024 * 1024 + 5,
                   help="element count of the large checks (all_reduce float32/bfloat16, all_gather float32); 0: none")
    p.add_argument("--dtypes", default="float32,bfloat16,float16,int64")
    p.add_argument("--no-graph", action="store_true", help="skip the CUDA graph checks")
    p.add_argument("--only", help="run only checks whose name matches this regex")
    p.add_argument("--timeout", type=float, default=120, help="process group timeout in seconds")
    p.add_argument("--quiet", action="store_true", help="print only failures and the summary")
    return p.parse_args()


# --------------------------------------------------------------------------- compare mode

def rank_files(path):
    stem, ext = os.path.splitext(path)
    files = sorted(glob.glob(f"{stem}.rank*{ext}"), key=lambda f: int(re.search(r"\.rank(\d+)", f).group(1)))
    return files or ([path] if os.path.exists(path) else [])


def compare(a_path, b_path):
    import torch
    fa, fb = rank_files(a_path), rank_files(b_path)
    if not fa or len(fa) != len(fb):
        print(f"compare: {a_path} has {len(fa)} rank files, {b_path} has {len(fb)}")
        return 1
    npass = nfail = 0
    for ra, rb in zip(fa, fb):
        A = torch.load(ra, map_location="cpu", weights_only=False)
        B = torch.load(rb, map_location="cpu", weights_only=False)
        print(f"# {ra}: {A['meta']}")
        print(f"# {rb}: {B['meta']}")
        keys = sorted(set(A["results"]) | set(B["results"]))
        for k in keys:
            a, b = A["results"].get(k), B["results"].get(k)
            if a is None or b is None:
                print(f"{os.path.basename(ra)} {k:<70} MISSING in {'A' if a is None else 'B'}")
                nfail += 1
                continue
            va, vb = a["vals"], b["vals"]
            if va.shape != vb.shape or va.dtype != vb.dtype:
                ok, err = False, float("inf")
            elif not va.dtype.is_floating_point:
                d = (va - vb).abs()
                err = float(d.max()) if d.numel() else 0.0
                ok = err == 0
            else:
                d = (va.double() - vb.double()).abs()
                tol = 2 * a["tol"].double() if a.get("tol") is not None else torch.zeros_like(d)
                ok = bool((d <= tol).all())
                err = float(d.max()) if d.numel() else 0.0
            npass += ok
            nfail += not ok
            if not ok:
                print(f"{os.path.basename(ra)} {k:<70} DIFF maxdiff={err:.4g}")
    print(f"compare: {npass} identical or within tolerance, {nfail} differ or missing")
    return 1 if nfail else 0


# --------------------------------------------------------------------------- the checks

class Ctx:
    def __init__(self, torch, dist, rank, world, local, dev):
        self.torch, self.dist = torch, dist
        self.r, self.n, self.local, self.dev = rank, world, local, dev
        self.sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)

    def vals(self, src, cnt, tag, dtype, scale=1):
        """int64 tensor of the closed-form inputs of rank src (see the module docstring)."""
        t = self.torch
        i = t.arange(cnt, device=self.dev, dtype=t.int64)
        v = (i * 7 + src * 13 + tag * 5 + 3) % 17 - 8
        if dtype == t.int64:
            v = v + ((i * 5 + src * 3 + tag) % 4) * BIG
        return v * scale


def eps_of(torch, dtype):
    return {torch.float32: 2.0 ** -23, torch.bfloat16: 2.0 ** -7, torch.float16: 2.0 ** -10}.get(dtype, 0.0)


class Skip(Exception):
    pass


class Case:
    """One collective (or several): fill(tag) writes inputs and poisons outputs, run() issues the
    collectives (eagerly or while a graph captures), results() gives (label, got, expected, absum)."""
    eager_only = False

    def __init__(self, c, dtype, cnt):
        self.c, self.dtype, self.cnt, self.tag = c, dtype, cnt, None
        self.t = c.torch

    def empty(self, cnt):
        return self.t.empty(cnt, dtype=self.dtype, device=self.c.dev)

    def poison(self, buf):
        buf.fill_(77)


def redop(c, dtype, op, fac_tensor=None):
    dist, torch = c.dist, c.torch
    if op == "sum":
        return dist.ReduceOp.SUM
    if op == "max":
        return dist.ReduceOp.MAX
    if op == "avg":
        return dist.ReduceOp.AVG
    if not dtype.is_floating_point:
        raise Skip("torch: PreMulSum needs a float type")
    if op == "premul":
        return dist._make_nccl_premul_sum(PREMUL_HOST)
    if op == "premul_dev":
        if dtype == torch.bfloat16:
            raise Skip("torch reads a bfloat16 device factor as float")
        return dist._make_nccl_premul_sum(fac_tensor)
    raise ValueError(op)


def reduce_expect(c, dtype, op, xs, fac):
    """Closed-form reduction of the int64 inputs xs; returns (expected, absum or None)."""
    torch = c.torch
    if not dtype.is_floating_point:
        s = torch.stack(xs)
        if op == "sum":
            return s.sum(0), None
        if op == "max":
            return s.max(0).values, None
        if op == "avg":
            return s.sum(0) // c.n, None  # exact: inputs were scaled by n
        raise ValueError(op)
    s = torch.stack(xs).double()
    if op == "max":
        return s.max(0).values, None
    if op == "sum":
        return s.sum(0), s.abs().sum(0)
    if op == "avg":
        return s.sum(0) / c.n, s.abs().sum(0) / c.n
    f = torch.tensor(fac, dtype=dtype).double().item()  # the factor rounded to the type
    return (s * f).sum(0), (s * f).abs().sum(0)


class AllReduce(Case):
    def __init__(self, c, dtype, cnt, op):
        super().__init__(c, dtype, cnt)
        self.op = op
        self.scale = c.n if (op == "avg" and not dtype.is_floating_point) else 1
        self.buf = self.empty(cnt)
        self.fac_t = None
        if op == "premul_dev" and dtype.is_floating_point:
            self.fac_t = self.t.empty(1, dtype=dtype, device=c.dev)
        self.rop = redop(c, dtype, op, self.fac_t)

    def fill(self, tag):
        self.tag = tag
        self.buf.copy_(self.c.vals(self.c.r, self.cnt, tag, self.dtype, self.scale).to(self.dtype))
        if self.fac_t is not None:
            self.fac_t.fill_(DEV_FACTORS[tag % len(DEV_FACTORS)])

    def run(self):
        self.c.dist.all_reduce(self.buf, op=self.rop)

    def results(self):
        xs = [self.c.vals(s, self.cnt, self.tag, self.dtype, self.scale) for s in range(self.c.n)]
        fac = DEV_FACTORS[self.tag % len(DEV_FACTORS)] if self.op == "premul_dev" else PREMUL_HOST
        e, a = reduce_expect(self.c, self.dtype, self.op, xs, fac)
        return [("", self.buf, e, a)]


class ReduceScatter(Case):
    def __init__(self, c, dtype, cnt, op, inplace=False):
        super().__init__(c, dtype, cnt)
        self.op, self.inplace = op, inplace
        self.inp = self.empty(cnt * c.n)
        self.out = self.inp[c.r * cnt:(c.r + 1) * cnt] if inplace else self.empty(cnt)
        self.rop = redop(c, dtype, op)

    def fill(self, tag):
        self.tag = tag
        if not self.inplace:
            self.poison(self.out)
        self.inp.copy_(self.c.vals(self.c.r, self.cnt * self.c.n, tag, self.dtype).to(self.dtype))

    def run(self):
        self.c.dist.reduce_scatter_tensor(self.out, self.inp, op=self.rop)

    def results(self):
        n, r, k = self.c.n, self.c.r, self.cnt
        xs = [self.c.vals(s, k * n, self.tag, self.dtype)[r * k:(r + 1) * k] for s in range(n)]
        e, a = reduce_expect(self.c, self.dtype, self.op, xs, PREMUL_HOST)
        return [("", self.out, e, a)]


class AllGather(Case):
    def __init__(self, c, dtype, cnt, inplace=False):
        super().__init__(c, dtype, cnt)
        self.inplace = inplace
        self.out = self.empty(cnt * c.n)
        self.inp = self.out[c.r * cnt:(c.r + 1) * cnt] if inplace else self.empty(cnt)

    def fill(self, tag):
        self.tag = tag
        self.poison(self.out)
        self.inp.copy_(self.c.vals(self.c.r, self.cnt, tag, self.dtype).to(self.dtype))

    def run(self):
        self.c.dist.all_gather_into_tensor(self.out, self.inp)

    def results(self):
        e = self.t.cat([self.c.vals(s, self.cnt, self.tag, self.dtype) for s in range(self.c.n)])
        return [("", self.out, e, None)]


class Broadcast(Case):
    def __init__(self, c, dtype, cnt, root):
        super().__init__(c, dtype, cnt)
        self.root = root
        self.buf = self.empty(cnt)

    def fill(self, tag):
        self.tag = tag
        if self.c.r == self.root:
            self.buf.copy_(self.c.vals(self.root, self.cnt, tag, self.dtype).to(self.dtype))
        else:
            self.poison(self.buf)

    def run(self):
        self.c.dist.broadcast(self.buf, self.root)

    def results(self):
        return [("", self.buf, self.c.vals(self.root, self.cnt, self.tag, self.dtype), None)]


class Reduce(Case):
    def __init__(self, c, dtype, cnt, root, op="sum"):
        super().__init__(c, dtype, cnt)
        self.root, self.op = root, op
        self.buf = self.empty(cnt)
        self.rop = redop(c, dtype, op)

    def fill(self, tag):
        self.tag = tag
        self.buf.copy_(self.c.vals(self.c.r, self.cnt, tag, self.dtype).to(self.dtype))

    def run(self):
        self.c.dist.reduce(self.buf, self.root, op=self.rop)

    def results(self):
        if self.c.r != self.root:
            return []  # only the root's buffer is defined
        xs = [self.c.vals(s, self.cnt, self.tag, self.dtype) for s in range(self.c.n)]
        e, a = reduce_expect(self.c, self.dtype, self.op, xs, None)
        return [("", self.buf, e, a)]


class AllToAll(Case):
    def __init__(self, c, dtype, cnt, uneven):
        super().__init__(c, dtype, cnt)
        n, r = c.n, c.r
        self.uneven = uneven
        base = cnt // n if uneven else cnt
        # split[s][d]: elements rank s sends to rank d
        self.split = [[base + ((s * 7 + d * 3 + 1) % 5 if uneven else 0) for d in range(n)] for s in range(n)]
        self.in_splits = self.split[r]
        self.out_splits = [self.split[s][r] for s in range(n)]
        self.inp = self.empty(sum(self.in_splits))
        self.out = self.empty(sum(self.out_splits))

    def fill(self, tag):
        self.tag = tag
        self.poison(self.out)
        self.inp.copy_(self.c.vals(self.c.r, self.inp.numel(), tag, self.dtype).to(self.dtype))

    def run(self):
        if self.uneven:
            self.c.dist.all_to_all_single(self.out, self.inp, output_split_sizes=self.out_splits,
                                          input_split_sizes=self.in_splits)
        else:
            self.c.dist.all_to_all_single(self.out, self.inp)

    def results(self):
        r, parts = self.c.r, []
        for s in range(self.c.n):
            row = self.split[s]
            off = sum(row[:r])
            parts.append(self.c.vals(s, sum(row), self.tag, self.dtype)[off:off + row[r]])
        return [("", self.out, self.t.cat(parts), None)]


class SendRecv(Case):
    """Pairs (0,1), (2,3)...: the even rank sends first, the odd one receives first."""

    def __init__(self, c, dtype, cnt):
        super().__init__(c, dtype, cnt)
        self.peer = c.r ^ 1
        if self.peer >= c.n:
            self.peer = None
        self.sbuf, self.rbuf = self.empty(cnt), self.empty(cnt)

    def fill(self, tag):
        self.tag = tag
        self.poison(self.rbuf)
        self.sbuf.copy_(self.c.vals(self.c.r, self.cnt, tag, self.dtype).to(self.dtype))

    def run(self):
        d = self.c.dist
        if self.peer is None:
            return
        if self.c.r % 2 == 0:
            d.send(self.sbuf, self.peer)
            d.recv(self.rbuf, self.peer)
        else:
            d.recv(self.rbuf, self.peer)
            d.send(self.sbuf, self.peer)

    def results(self):
        if self.peer is None:
            return []
        return [("", self.rbuf, self.c.vals(self.peer, self.cnt, self.tag, self.dtype), None)]


class Ring(Case):
    """batch_isend_irecv: send to rank+1, receive from rank-1."""

    def __init__(self, c, dtype, cnt):
        super().__init__(c, dtype, cnt)
        self.sbuf, self.rbuf = self.empty(cnt), self.empty(cnt)

    def fill(self, tag):
        self.tag = tag
        self.poison(self.rbuf)
        self.sbuf.copy_(self.c.vals(self.c.r, self.cnt, tag, self.dtype).to(self.dtype))

    def run(self):
        d, n, r = self.c.dist, self.c.n, self.c.r
        ops = [d.P2POp(d.isend, self.sbuf, (r + 1) % n), d.P2POp(d.irecv, self.rbuf, (r - 1) % n)]
        for w in d.batch_isend_irecv(ops):
            w.wait()

    def results(self):
        src = (self.c.r - 1) % self.c.n
        return [("", self.rbuf, self.c.vals(src, self.cnt, self.tag, self.dtype), None)]


class Barrier(Case):
    eager_only = True

    def fill(self, tag):
        self.tag = tag

    def run(self):
        self.c.dist.barrier()

    def results(self):
        return []


class Combo(Case):
    """Several collectives captured into one graph."""

    def __init__(self, c, dtype, cnt, parts):
        super().__init__(c, dtype, cnt)
        self.parts = parts

    def fill(self, tag):
        for i, p in enumerate(self.parts):
            p.fill(tag + 7 * i)

    def run(self):
        for p in self.parts:
            p.run()

    def results(self):
        out = []
        for i, p in enumerate(self.parts):
            out += [(f"{type(p).__name__}{lab}", g, e, a) for lab, g, e, a in p.results()]
        return out


# --------------------------------------------------------------------------- driver

class Runner:
    def __init__(self, c, args):
        self.c, self.args = c, args
        self.records = []  # [key, status, err, note]
        self.dump = {}
        self.only = re.compile(args.only) if args.only else None

    def line(self, key, status, err, note):
        if self.c.r == 0 and (not self.args.quiet or status == "FAIL"):
            print(f"{key:<62} {status:<4} maxerr={err:<10.4g} {note}", flush=True)
        elif self.c.r != 0 and status == "FAIL":
            print(f"[rank {self.c.r}] {key:<62} {status:<4} maxerr={err:<10.4g} {note}", flush=True)

    def compare(self, results):
        torch, worst, ok, outs = self.c.torch, 0.0, True, []
        for lab, got, exp, absum in results:
            if not self.c.torch.is_floating_point(got):
                d = (got.to(torch.int64) - exp.to(torch.int64)).abs()
                tol = None
                good = bool((d == 0).all())
            else:
                d = (got.double() - exp.double()).abs()
                eps = eps_of(torch, got.dtype)
                tol = (self.c.n + 1) * eps * absum if absum is not None else torch.zeros_like(d)
                good = bool((d <= tol).all())
            err = float(d.max()) if d.numel() else 0.0
            worst = float("nan") if math.isnan(err) or math.isnan(worst) else max(worst, err)
            ok = ok and good
            outs.append((lab, got, tol))
        return ok, worst, outs

    def sample(self, t):
        t = t.reshape(-1)
        step = max(1, -(-t.numel() // 16384))
        return t[::step].cpu().clone()

    def check(self, name, dtype, cnt, mode, make, replays=3):
        torch = self.c.torch
        dname = str(dtype).replace("torch.", "")
        key = f"{name} {dname} {cnt} {mode}"
        if self.only and not self.only.search(name):
            return
        try:
            case = make()
            if mode == "eager":
                case.fill(1)
                case.run()
                self.c.sync()
                rounds = [(1, case.results())]
            else:
                s = torch.cuda.Stream()
                s.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(s):
                    case.fill(100)
                    case.run()  # warm-up outside the capture
                torch.cuda.current_stream().wait_stream(s)
                torch.cuda.synchronize()
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g):
                    case.run()
                rounds = []
                for k in range(replays):
                    case.fill(200 + k)  # new inputs in the captured buffers
                    g.replay()
                    torch.cuda.synchronize()
                    # results() names the live buffers: keep this replay's values
                    # before the next replay overwrites them.
                    res = [(lab, got.clone(), *rest) for lab, got, *rest in case.results()]
                    rounds.append((200 + k, res))
            ok, worst, tag = True, 0.0, None
            for tag, res in rounds:
                o, w, outs = self.compare(res)
                ok = ok and o
                worst = float("nan") if math.isnan(w) or math.isnan(worst) else max(worst, w)
                if self.args.dump:
                    for lab, got, tol in outs:
                        self.dump[f"{key}{'/' + lab if lab else ''} tag{tag}"] = {
                            "vals": self.sample(got), "tol": None if tol is None else self.sample(tol)}
            status, note = ("ok" if ok else "FAIL"), ""
        except Skip as e:
            status, worst, note = "skip", 0.0, str(e)
        except Exception as e:  # a failed collective is a failed check; keep going
            status, worst = "FAIL", float("nan")
            note = f"{type(e).__name__}: {str(e).strip().splitlines()[0][:200] if str(e).strip() else ''}"
            if os.environ.get("DROPIN_TRACEBACK"):
                traceback.print_exc()
        self.records.append([key, status, worst, note])
        self.line(key, status, worst, note)


def main():
    args = parse_args()
    if args.compare:
        sys.exit(compare(*args.compare))

    import torch
    import torch.distributed as dist

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local = int(os.environ.get("LOCAL_RANK", rank))
    timeout = datetime.timedelta(seconds=args.timeout)
    if os.environ.get("DROPIN_CPU"):  # development only: gloo on the CPU, no graphs (many checks fail there)
        dev, args.no_graph = torch.device("cpu"), True
        dist.init_process_group(backend="gloo", timeout=timeout)
        nccl_ver, dev_name = "none (gloo)", "cpu"
    else:
        torch.cuda.set_device(local)
        dev = torch.device("cuda", local)
        dist.init_process_group(backend="nccl", device_id=dev, timeout=timeout)
        nccl_ver, dev_name = ".".join(map(str, torch.cuda.nccl.version())), torch.cuda.get_device_name(dev)
    c = Ctx(torch, dist, rank, world, local, dev)
    R = Runner(c, args)
    meta = {"torch": torch.__version__, "nccl_version": nccl_ver, "world": world,
            "preload": os.environ.get("LD_PRELOAD", ""), "device": dev_name}
    if rank == 0:
        print(f"# dropin_check: {meta}", flush=True)

    dtypes = [getattr(torch, d) for d in args.dtypes.split(",") if d]
    sizes = [int(s) for s in args.sizes.split(",") if s]
    roots = sorted({0, world // 2, world - 1})
    fl = lambda dt: dt.is_floating_point
    t0 = time.time()

    R.check("barrier", torch.float32, 1, "eager", lambda: Barrier(c, torch.float32, 1))
    for dt in dtypes:
        for n in sizes:
            for op in ["sum", "avg", "max", "premul", "premul_dev"]:
                if op == "premul_dev" and dt in (torch.bfloat16, torch.int64):
                    continue
                R.check(f"all_reduce.{op}", dt, n, "eager", lambda: AllReduce(c, dt, n, op))
            R.check("reduce_scatter_tensor.sum", dt, n, "eager", lambda: ReduceScatter(c, dt, n, "sum"))
            R.check("reduce_scatter_tensor.sum.inplace", dt, n, "eager", lambda: ReduceScatter(c, dt, n, "sum", True))
            if fl(dt):
                R.check("reduce_scatter_tensor.premul", dt, n, "eager", lambda: ReduceScatter(c, dt, n, "premul"))
            R.check("all_gather_into_tensor", dt, n, "eager", lambda: AllGather(c, dt, n))
            R.check("all_gather_into_tensor.inplace", dt, n, "eager", lambda: AllGather(c, dt, n, True))
            for root in roots:
                R.check(f"broadcast.root{root}", dt, n, "eager", lambda: Broadcast(c, dt, n, root))
                R.check(f"reduce.sum.root{root}", dt, n, "eager", lambda: Reduce(c, dt, n, root))
            R.check("reduce.max.root0", dt, n, "eager", lambda: Reduce(c, dt, n, 0, "max"))
            R.check("all_to_all_single.even", dt, n, "eager", lambda: AllToAll(c, dt, n, False))
            R.check("all_to_all_single.uneven", dt, n, "eager", lambda: AllToAll(c, dt, n, True))
            R.check("send_recv.pairs", dt, n, "eager", lambda: SendRecv(c, dt, n))
            R.check("batch_isend_irecv.ring", dt, n, "eager", lambda: Ring(c, dt, n))
        R.check("barrier", dt, 1, "eager", lambda: Barrier(c, dt, 1))
    if args.large:
        L = args.large
        for dt in [torch.float32, torch.bfloat16]:
            R.check("all_reduce.sum", dt, L, "eager", lambda: AllReduce(c, dt, L, "sum"))
        R.check("all_gather_into_tensor", torch.float32, L // world, "eager", lambda: AllGather(c, torch.float32, L // world))
        R.check("reduce_scatter_tensor.sum", torch.bfloat16, L // world, "eager",
                lambda: ReduceScatter(c, torch.bfloat16, L // world, "sum"))
    t_eager = time.time() - t0

    if not args.no_graph:
        for dt in dtypes:
            for n in [int(s) for s in args.graph_sizes.split(",") if s]:
                for op in ["sum", "avg", "max", "premul", "premul_dev"]:
                    if op in ("premul", "premul_dev") and not fl(dt):
                        continue
                    if op == "premul_dev" and dt == torch.bfloat16:
                        continue
                    R.check(f"all_reduce.{op}", dt, n, "graph", lambda: AllReduce(c, dt, n, op))
                R.check("reduce_scatter_tensor.sum", dt, n, "graph", lambda: ReduceScatter(c, dt, n, "sum"))
                R.check("all_gather_into_tensor", dt, n, "graph", lambda: AllGather(c, dt, n))
                R.check(f"broadcast.root{world - 1}", dt, n, "graph", lambda: Broadcast(c, dt, n, world - 1))
                R.check("reduce.sum.root0", dt, n, "graph", lambda: Reduce(c, dt, n, 0))
                R.check("all_to_all_single.even", dt, n, "graph", lambda: AllToAll(c, dt, n, False))
                R.check("all_to_all_single.uneven", dt, n, "graph", lambda: AllToAll(c, dt, n, True))
                R.check("send_recv.pairs", dt, n, "graph", lambda: SendRecv(c, dt, n))
                R.check("batch_isend_irecv.ring", dt, n, "graph", lambda: Ring(c, dt, n))
                R.check("combo(ar+ag+rs+a2a)", dt, n, "graph", lambda: Combo(c, dt, n, [
                    AllReduce(c, dt, n, "sum"), AllGather(c, dt, n), ReduceScatter(c, dt, n, "sum"),
                    AllToAll(c, dt, n, True)]))
    t_all = time.time() - t0

    if args.dump:
        stem, ext = os.path.splitext(args.dump)
        torch.save({"meta": meta, "results": R.dump}, f"{stem}.rank{rank}{ext or '.pt'}")

    # Merge every rank's verdicts through the TCP store (not through NCCL, which may be broken).
    mine = {k: [s, e, nt] for k, s, e, nt in R.records}
    merged = {k: dict(v=[s, e, nt], bad=[]) for k, s, e, nt in R.records}
    try:
        store = dist.distributed_c10d._get_default_store()
        store.set(f"dropin/{rank}", json.dumps(mine))
        if rank == 0:
            for s in range(1, world):
                other = json.loads(store.get(f"dropin/{s}"))
                for k, (st, e, nt) in other.items():
                    m = merged.setdefault(k, dict(v=[st, e, nt], bad=[]))
                    if st == "FAIL":
                        m["bad"].append(f"rank {s}: {nt}")
    except Exception as e:
        print(f"[rank {rank}] could not merge results through the store: {e}", flush=True)
    npass = sum(1 for m in merged.values() if m["v"][0] == "ok" and not m["bad"])
    nskip = sum(1 for m in merged.values() if m["v"][0] == "skip")
    nfail = len(merged) - npass - nskip
    if rank == 0:
        for k, m in merged.items():
            if m["bad"] and m["v"][0] != "FAIL":
                print(f"{k:<62} FAIL on other ranks: {'; '.join(m['bad'])[:300]}")
        print(f"# eager {t_eager:.1f}s, total {t_all:.1f}s")
        print(f"{npass} passed, {nfail} failed, {nskip} skipped", flush=True)

    # Tear down through NCCL's destroy path, but never hang on it.
    done = threading.Event()

    def teardown():
        try:
            dist.destroy_process_group()
        finally:
            done.set()

    threading.Thread(target=teardown, daemon=True).start()
    if not done.wait(30):
        print(f"[rank {rank}] destroy_process_group did not return within 30 s", flush=True)
        nfail += 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(1 if nfail else 0)


if __name__ == "__main__":
    main()
