#!/usr/bin/env python3
"""A real DCP writer and its checker for the stress campaign (issue 42 item 4).

    dcp_job.py save  --ns NS --step S --seed X --sockets A[,B...] [--wait-durable SECONDS] [--go FILE]
    dcp_job.py check --ns NS --step S --seed X --world W (--socket A | --durable-dir DIR)
    dcp_job.py serve     # checks asked for on stdin, one JSON line each (the campaign's oracle)

save: a torchrun job of W = len(sockets) ranks in one gloo group (this machine, a free port), rank
r saving through the agent at sockets[r], so a step whose ranks reach two agents spans them (its commit goes
through the coordinator's agent to the other's, decision 102). Each rank's state is a function of
(seed, step, rank): four float32 tensors of 16 K elements and a small dict. `dcp.save` through
`TieredWriter(persist=True)`; rank 0 then waits until the coordinator's agent lists the step
durable and prints `COMMITTED <ns> <step>`, the campaign's acknowledgement (as tc_test_writer's with
--wait-durable). Exit 0 only then. With --go FILE the job is started ahead of its round: every rank
imports torch and joins the process group, then waits until FILE says `go` before it makes its
writer (no agent is touched until then); `abort` ends it unsaved (exit 1).

check: one process, no process group: `dcp.load` of every rank's keys through `TieredReader` on
one agent (what a restarted job reads), or through stock DCP's `FileSystemReader` on the step's
durable directory (the step read without any agent), compared with the seed's tensors. Exit 0:
identical; 3: loaded with other values (wrong bytes); 2: not loadable (the error on stderr).

serve: the same check, without paying torch's import (1.5-4 s on the 2-core VM) for each. The server
imports torch, DCP and tierckpt once, connects to no agent, and for each request (one line of JSON:
the check's ns, step, seed, world and socket or durable_dir) forks a child that runs `check` exactly
as above in a process of its own: its own connection to the agent (tierckpt's client cache is per
process id), its own mappings, all released when it exits, as a `check` process's are. It answers
one line of JSON: {"rc": the child's exit status (negative: killed by that signal), "stderr": what
it wrote}. The server itself runs no torch operation, so no thread pool exists to be forked.
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time

TENSORS, ELEMENTS = 4, 16 * 1024


def expected_state(seed: int, step: int, rank: int):
    import torch

    out = {}
    for i in range(TENSORS):
        g = torch.Generator().manual_seed((seed * 1000003 + step * 7919 + rank * 131 + i) & ((1 << 63) - 1))
        out[f"r{rank}.t{i}"] = torch.rand(ELEMENTS, generator=g)
    out[f"r{rank}.meta"] = {"seed": seed, "step": step, "rank": rank}
    return out


def blank_state(world: int):
    import torch

    out = {}
    for r in range(world):
        for i in range(TENSORS):
            out[f"r{r}.t{i}"] = torch.zeros(ELEMENTS)
        out[f"r{r}.meta"] = {"seed": -1, "step": -1, "rank": -1}  # DCP loads only the keys a template has
    return out


def wait_for_go(path: str, limit_s: float = 3600.0) -> bool:
    """--go: the job started ahead of its round (its imports and process group are ready); the
    campaign writes "go" into `path` when the round starts its writers, or "abort" to call it off."""
    deadline = time.time() + limit_s
    while time.time() < deadline:
        try:
            with open(path) as f:
                word = f.read().strip()
        except FileNotFoundError:
            word = ""
        if word:
            return word == "go"
        time.sleep(0.01)
    return False


def rank_main(args) -> int:
    """One rank of the torchrun job (RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT from torchrun)."""
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp

    from tierckpt import CheckpointConfig
    from tierckpt.torch import TieredWriter

    sockets = args.sockets.split(",")
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo")
    try:
        if args.go and not wait_for_go(args.go):
            return 1  # called off before it began: nothing saved, not acknowledged
        cfg = CheckpointConfig(args.ns, socket=sockets[rank], auto_start=False, world_size=world)
        dcp.save(expected_state(args.seed, args.step, rank), storage_writer=TieredWriter(cfg, args.step, persist=True))
        dist.barrier()
    finally:
        dist.destroy_process_group()
    return 0  # an exception above ends the rank with a traceback and exit 1, through the interpreter


def save(args) -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    world = len(args.sockets.split(","))
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(world), "--master-addr",
           "127.0.0.1", "--master-port", str(port), "--max-restarts", "0", os.path.abspath(__file__), "rank",
           "--ns", args.ns, "--step", str(args.step), "--seed", str(args.seed), "--sockets", args.sockets]
    if args.go:
        cmd += ["--go", args.go]
    r = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL,
                       env=dict(os.environ, OMP_NUM_THREADS="1"))
    if r.returncode != 0:  # a rank raised or was killed: not acknowledged
        lines = [x for x in (r.stderr + r.stdout).splitlines() if x.strip() and "*****" not in x]
        print(f"dcp_job: the torchrun save of {args.ns}/{args.step} exited {r.returncode}: "
              + " | ".join(lines[-6:])[:2000], file=sys.stderr)
        return 1
    cli = os.environ.get("TIERCKPT_CLI", "tierckpt")
    deadline = time.time() + args.wait_durable
    while True:
        r = subprocess.run([cli, "--socket", args.sockets.split(",")[0], "ls", args.ns, "--json"],
                           capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        if r.returncode == 0:
            steps = {s["step"]: s for s in json.loads(r.stdout)["steps"] if s["namespace"] == args.ns}
            if steps.get(args.step, {}).get("durable") == "committed":
                print(f"COMMITTED {args.ns} {args.step}", flush=True)
                return 0
        if time.time() > deadline:
            print(f"dcp_job: {args.ns}/{args.step} committed in memory but not durable within "
                  f"{args.wait_durable} s (ls: {r.stdout.strip()[:400]} {r.stderr.strip()[:400]})", file=sys.stderr)
            return 1
        time.sleep(0.2)


def check(args) -> int:
    import warnings

    import torch
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.api import CheckpointException

    warnings.filterwarnings("ignore", message="torch.distributed is disabled")  # no_dist=True is the intent
    got = blank_state(args.world)
    try:
        if args.durable_dir:
            reader = dcp.FileSystemReader(args.durable_dir)
        else:
            from tierckpt import CheckpointConfig
            from tierckpt.torch import TieredReader

            reader = TieredReader(CheckpointConfig(args.ns, socket=args.socket, auto_start=False), args.step)
        dcp.load(got, storage_reader=reader, no_dist=True)
    except (Exception, CheckpointException) as e:  # noqa: BLE001
        # Any failure to load is "not loadable", with its reason (DCP's CheckpointException is a
        # BaseException: it went past `except Exception` as a traceback without its message).
        print(f"{type(e).__name__}: {e}".replace("\n", " | ")[:2000], file=sys.stderr)
        return 2
    for r in range(args.world):
        want = expected_state(args.seed, args.step, r)
        for k, v in want.items():
            ok = torch.equal(got[k], v) if isinstance(v, torch.Tensor) else got[k] == v
            if not ok:
                print(f"{args.ns}/{args.step}: {k} loaded with other values than seed {args.seed} wrote",
                      file=sys.stderr)
                return 3
    return 0


def serve() -> int:
    import torch  # noqa: F401  (imported once here: what each forked check would otherwise import)
    import torch.distributed.checkpoint  # noqa: F401
    from torch.distributed.checkpoint.api import CheckpointException  # noqa: F401

    import tierckpt.torch  # noqa: F401

    out = sys.stdout
    print("READY", file=out, flush=True)
    for line in sys.stdin:
        if not line.strip():
            continue
        req = json.loads(line)
        args = argparse.Namespace(ns=req["ns"], step=int(req["step"]), seed=int(req["seed"]),
                                  world=int(req["world"]), socket=req.get("socket"),
                                  durable_dir=req.get("durable_dir"))
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the check, in a process of its own
            rc = 1
            try:
                os.close(r)
                null = os.open(os.devnull, os.O_RDWR)
                os.dup2(null, 0)
                os.dup2(null, 1)  # never onto the server's answers
                os.dup2(w, 2)
                rc = check(args)
            except BaseException:  # noqa: BLE001  (as an uncaught exception ends a `check` process: 1)
                import traceback

                traceback.print_exc()
            finally:
                try:
                    sys.stdout.flush()
                    sys.stderr.flush()
                finally:
                    os._exit(rc)
        os.close(w)
        chunks = []
        with os.fdopen(r, "rb") as f:
            for chunk in iter(lambda: f.read(65536), b""):
                chunks.append(chunk)
        _, status = os.waitpid(pid, 0)
        rc = os.waitstatus_to_exitcode(status)
        out.write(json.dumps({"rc": rc, "stderr": b"".join(chunks).decode(errors="replace")}) + "\n")
        out.flush()
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("mode", choices=["save", "check", "rank", "serve"])
    p.add_argument("--ns")
    p.add_argument("--step", type=int)
    p.add_argument("--seed", type=int)
    p.add_argument("--sockets", help="save: the agents' sockets, one per rank")
    p.add_argument("--wait-durable", type=float, default=60.0)
    p.add_argument("--go", help="save: start now, but let every rank (torch imported, process group up) wait "
                                "until this file says go (or abort) before it touches an agent")
    p.add_argument("--world", type=int, help="check: the ranks the step was saved with")
    p.add_argument("--socket", help="check: the agent to load through")
    p.add_argument("--durable-dir", help="check: load the durable copy with stock DCP instead")
    args = p.parse_args(argv)
    if args.mode == "serve":
        return serve()
    if args.ns is None or args.step is None or args.seed is None:
        p.error(f"{args.mode} needs --ns, --step and --seed")
    if args.mode in ("save", "rank"):
        if not args.sockets:
            p.error(f"{args.mode} needs --sockets")
        if args.mode == "save":
            return save(args)
        rc = rank_main(args)
        # The rank's work is over: its shard committed, the barrier passed, the process group destroyed.
        # Leave without the interpreter's teardown of torch (0.5-2 s on the 2-core VM, in every DCP
        # round); tierckpt registers no atexit work, and the kernel closes the agent connection as at
        # any exit (decision 128).
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(rc)
    if not args.world or not (args.socket or args.durable_dir):
        p.error("check needs --world and --socket or --durable-dir")
    return check(args)


if __name__ == "__main__":
    sys.exit(main())
