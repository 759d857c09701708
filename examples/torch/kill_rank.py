#!/usr/bin/env python3
"""Kill one rank with SIGKILL in the middle of all-reduces; the survivors must see it, and nothing hangs.

    LD_PRELOAD=$PWD/.gpu/libweft_nccl.so torchrun --nproc-per-node 2 examples/torch/kill_rank.py \
        --victim 1 --require-rank-name --json kill.json

torchrun tears every worker down as soon as one dies, which would kill the survivors before they
could observe anything. So each torchrun worker runs the real rank as a child process (the same
script with --child) and outlives it: the victim's worker waits for the survivors' reports, a
survivor's worker returns its child's status. Neither the worker nor the child ever waits
without a deadline; the whole run ends within --deadline seconds (default 55) in every outcome.

Inside a child: the process group has --pg-timeout (20 s); TORCH_NCCL_BLOCKING_WAIT=1 makes
work.wait() raise on the host when the work times out or when the watchdog finds an error
through ncclCommGetAsyncError, and TORCH_NCCL_ASYNC_ERROR_HANDLING=2 (clean up only) lets the
watchdog abort the communicator (ncclCommAbort) without killing the process. The victim writes
the time of its kill to a file; each survivor records how long after the kill its wait() raised,
the text PyTorch gave, whether that text names the dead rank, and how long the abort of the
process group took. Exit status: 0 when every survivor saw an error within --max-detect seconds
(and, with --require-rank-name, the text names the victim) and its abort returned; 1 otherwise.
"""
import argparse
import datetime
import glob
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--victim", type=int, default=1)
    p.add_argument("--kill-after", type=int, default=20, help="iterations before the victim kills itself")
    p.add_argument("--count", type=int, default=1 << 20, help="elements per all-reduce (float32)")
    p.add_argument("--pg-timeout", type=float, default=20.0)
    p.add_argument("--max-detect", type=float, default=30.0, help="seconds from the kill to the error at most")
    p.add_argument("--deadline", type=float, default=55.0, help="seconds the whole run may take")
    p.add_argument("--require-rank-name", action="store_true", help="the error text must name the dead rank")
    p.add_argument("--dir", default=None, help="folder for the kill time and the reports (default: /tmp/kill_rank.<port>)")
    p.add_argument("--json", default=None, help="rank 0's worker (or the first survivor's) writes all reports here")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    return p.parse_args()


def workdir(args):
    return args.dir or f"/tmp/kill_rank.{os.environ.get('MASTER_PORT', '0')}"


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')} rank {os.environ.get('RANK', '?')}] {msg}", flush=True)


def child(args):
    """One rank: all-reduce in a loop; the victim kills itself, a survivor reports what it saw."""
    os.environ.setdefault("TORCH_NCCL_BLOCKING_WAIT", "1")
    os.environ.setdefault("TORCH_NCCL_ASYNC_ERROR_HANDLING", "2")
    t_start = time.time()
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    d = workdir(args)
    report = {"rank": rank, "victim": args.victim, "observed": False}

    def write_report():
        with open(f"{d}/report.{rank}.json.tmp", "w") as f:
            json.dump(report, f, indent=1)
        os.replace(f"{d}/report.{rank}.json.tmp", f"{d}/report.{rank}.json")

    # A hard stop: whatever hangs (a wait, the abort, the interpreter's teardown), the child ends.
    def hard_stop():
        report["hang"] = "child deadline reached: something did not return"
        log(report["hang"])
        write_report()
        os._exit(3)

    budget = args.deadline - 8 - (time.time() - float(os.environ.get("KILL_RANK_T0", t_start)))
    threading.Timer(max(budget, 5), hard_stop).start()

    import torch
    import torch.distributed as dist
    local = int(os.environ.get("LOCAL_RANK", rank))
    timeout = datetime.timedelta(seconds=args.pg_timeout)
    if os.environ.get("KILL_RANK_CPU"):  # development only: the same flow over gloo on the CPU
        dev = torch.device("cpu")
        dist.init_process_group(backend="gloo", timeout=timeout)
        report["nccl_version"] = "none (gloo)"
    else:
        torch.cuda.set_device(local)
        dev = torch.device("cuda", local)
        dist.init_process_group(backend="nccl", device_id=dev, timeout=timeout)
        report["nccl_version"] = ".".join(map(str, torch.cuda.nccl.version()))
    x = torch.empty(args.count, device=dev)
    it = 0
    try:
        while True:
            x.fill_(rank + 1)
            if rank == args.victim and it == args.kill_after:
                with open(f"{d}/kill_time.tmp", "w") as f:
                    f.write(repr(time.time()))
                os.replace(f"{d}/kill_time.tmp", f"{d}/kill_time")
                log(f"iteration {it}: SIGKILL to myself")
                os.kill(os.getpid(), signal.SIGKILL)
            w = dist.all_reduce(x, async_op=True)
            w.wait()
            if dev.type == "cuda":
                torch.cuda.current_stream().synchronize()
            want = world * (world + 1) / 2
            if it < args.kill_after and not bool((x == want).all()):
                report["wrong_before_kill"] = it
            it += 1
    except Exception as e:  # what PyTorch surfaces
        t_err = time.time()
        text = f"{type(e).__name__}: {e}"
        report.update(observed=True, iterations=it, error=text[:4000])
        try:
            t_kill = float(open(f"{d}/kill_time").read())
            report["detect_s"] = round(t_err - t_kill, 3)
        except OSError:
            report["detect_s"] = None
        report["names_rank"] = bool(re.search(rf"\brank\W{{0,3}}{args.victim}\b", text, re.I))
        log(f"error after {report['detect_s']} s from the kill, at iteration {it}:\n{text[:2000]}")
    # Abort the communicators; it must return promptly even with a dead peer.
    t0 = time.time()
    try:
        if hasattr(dist.distributed_c10d, "_abort_process_group"):
            dist.distributed_c10d._abort_process_group()
            report["abort_via"] = "_abort_process_group"
        else:
            dist.destroy_process_group()
            report["abort_via"] = "destroy_process_group"
        report["abort_s"] = round(time.time() - t0, 3)
    except Exception as e:
        report["abort_s"] = round(time.time() - t0, 3)
        report["abort_error"] = f"{type(e).__name__}: {e}"[:1000]
    log(f"abort returned after {report['abort_s']} s")
    write_report()
    os._exit(0)


def worker(args):
    """The process torchrun watches: runs the rank as a child and outlives it."""
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    t0 = time.time()
    d = workdir(args)
    if rank == 0:
        os.makedirs(d, exist_ok=True)
        for f in glob.glob(f"{d}/*"):
            os.remove(f)
        open(f"{d}/ready", "w").close()
    else:
        while not os.path.exists(f"{d}/ready") and time.time() - t0 < 10:
            time.sleep(0.05)
    env = dict(os.environ, KILL_RANK_T0=repr(t0))
    p = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--child"] + sys.argv[1:], env=env)
    survivors = [r for r in range(world) if r != args.victim]
    try:
        rc = p.wait(timeout=max(args.deadline - 4 - (time.time() - t0), 1))
    except subprocess.TimeoutExpired:
        log("child outlived its deadline: SIGKILL")
        p.kill()
        rc = p.wait()
    if rank == args.victim:
        expected = rc == -signal.SIGKILL
        log(f"victim child ended with {rc} ({'killed as planned' if expected else 'UNEXPECTED'})")
    # Wait (bounded) for every survivor's report, then the first survivor summarizes.
    while time.time() - t0 < args.deadline - 2:
        if all(os.path.exists(f"{d}/report.{r}.json") for r in survivors):
            break
        time.sleep(0.1)
    if rank != survivors[0]:
        sys.exit(0 if rank == args.victim else (0 if rc == 0 else 1))
    reports = []
    for r in survivors:
        try:
            reports.append(json.load(open(f"{d}/report.{r}.json")))
        except (OSError, ValueError):
            reports.append({"rank": r, "observed": False, "hang": "no report (child killed or hung)"})
    ok = True
    print("\n# kill_rank: victim", args.victim, "of", world)
    print(f"# {'rank':>4} {'observed':>8} {'detect_s':>9} {'names_rank':>10} {'abort_s':>8}  error")
    for rep in reports:
        good = (rep.get("observed") and rep.get("detect_s") is not None and rep["detect_s"] <= args.max_detect
                and "abort_s" in rep and not rep.get("hang") and "wrong_before_kill" not in rep
                and (rep.get("names_rank") or not args.require_rank_name))
        ok = ok and bool(good)
        first = (rep.get("error") or rep.get("hang") or "").strip().splitlines()
        print(f"  {rep['rank']:>4} {str(rep.get('observed')):>8} {str(rep.get('detect_s')):>9} "
              f"{str(rep.get('names_rank')):>10} {str(rep.get('abort_s')):>8}  {first[0][:160] if first else ''}"
              f"  {'ok' if good else 'FAIL'}")
    if args.json:
        json.dump({"victim": args.victim, "world": world, "ok": ok, "reports": reports}, open(args.json, "w"), indent=1)
    print(f"kill_rank: {'ok' if ok else 'FAIL'} ({time.time() - t0:.1f} s)", flush=True)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    a = parse_args()
    child(a) if a.child else worker(a)
