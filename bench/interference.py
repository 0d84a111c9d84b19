#!/usr/bin/env python3
"""interference.py - how much checkpointing slows a CPU-bound training loop (issue 18, deliverable 3).

    python bench/interference.py [--json] [--rounds 3] [--steps 60] [--every 10] [--warmup 5]
                                 [--hidden 1024] [--layers 3] [--batch 256]
                                 [--persist-rate 64MiB] [--replicate-rate 64MiB] [--priority low]
                                 [--build-dir build/release] [--peers-venv build/peers-venv]

The workload: 2 ranks under torchrun (gloo), each training its own MLP (--layers
Linear(--hidden, --hidden) + ReLU, AdamW, a batch of --batch rows; one torch
thread per rank) on the 2-core machine, a 4-byte all_reduce per step keeping the
ranks in lockstep (checkpoint collectives use a gloo group of their own). Every --every steps each configuration checkpoints the whole
state (parameters and AdamW's exp_avg/exp_avg_sq, keyed per rank):

  none          no checkpoint: the baseline.
  tierckpt      dcp.async_save(state, storage_writer=TieredWriter(cfg, step)) into
                agent n1, which persists every step (--persist-every 1) to a
                directory on the local disk (--durable) and replicates it to a peer
                agent n2 (--peers, --replicas 2, --replica-ack none) on loopback;
                caps off: the agent's defaults with --background-priority normal.
  tierckpt_caps the same with --persist-rate, --replicate-rate and
                --background-priority (--priority; default low).
  dlrover       DLRover Flash Checkpoint (DdpCheckpointer.save_checkpoint,
                StorageType.DISK: memory copy, then its saver process writes the
                directory) when --peers-venv holds dlrover (bench/peers.py builds
                it); skipped otherwise, with the reason.

A save that is still running when the next is due is waited for inside that
step (it counts in the step time). The configurations are interleaved round by
round (--rounds), so machine noise hits all. Agents are started fresh for each
run and stopped after it.

Reported: per configuration, the step time (median and p90 over every timed
step of every round, the slowest rank's per step) and its ratio to the `none`
median; for the tierckpt configurations the time to durable of each checkpoint
(save start on rank 0 -> the agent's first `persist` log line for that step),
whether every checkpoint was durable before the next one was due, and the CPU
seconds both agents used per checkpoint (their /proc stat once every checkpoint
of the run was persisted): what the background work takes from the cores the
trainers run on.

Output: a table, or with --json ONE JSON object {"machine", "command", "config",
"results", "ratios"}. Exit status 0; 1 when a run fails; 2 on bad arguments or
missing binaries (build first: scripts/setup.sh release).
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(REPO / "tests" / "harness"))
from agent_harness import AgentProcess, Binaries, stop_all, write_hostfile  # noqa: E402  (tests/harness)
SHM = Path("/dev/shm")
CONFIGS = ("none", "tierckpt", "tierckpt_caps", "dlrover")


class BenchError(Exception):
    pass


# ---- the rank side (run by torchrun: interference.py --worker OPTS_JSON) -----

def worker(opts: dict) -> None:
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=180))
    rank = dist.get_rank()
    # The save's collectives (DCP planning, and the finish in async_save's
    # background thread) get a group of their own: sharing the training's would
    # interleave them with its all_reduce and hang both.
    ckpt_group = dist.new_group(backend="gloo")
    torch.manual_seed(1234 + rank)
    h = opts["hidden"]
    layers = []
    for _ in range(opts["layers"]):
        layers += [torch.nn.Linear(h, h), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(opts["batch"], h)
    y = torch.randn(opts["batch"], h)
    mode = opts["mode"]
    save = None
    if mode in ("tierckpt", "tierckpt_caps"):
        import torch.distributed.checkpoint as dcp
        from tierckpt.torch import CheckpointConfig, TieredWriter

        cfg = CheckpointConfig(opts["namespace"], socket=opts["socket"], auto_start=False, persist_every=0)

        def save(step, state):
            return dcp.async_save(state, storage_writer=TieredWriter(cfg, step), process_group=ckpt_group)
    elif mode == "dlrover":
        from dlrover.trainer.torch.flash_checkpoint.ddp import DdpCheckpointer, StorageType

        world = dist.get_world_size()
        ckpt = DdpCheckpointer(opts["dlrover_dir"], local_shard_num=world, global_shard_num=world)

        def save(step, state):
            ckpt.save_checkpoint(step, state, storage_type=StorageType.DISK)
            return None

    def train_step():
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad(set_to_none=False)
        loss.backward()
        opt.step()
        t = loss.detach().reshape(1)
        dist.all_reduce(t)

    for _ in range(opts["warmup"]):
        train_step()
    times, saves = [], []
    pending = None
    for step in range(1, opts["steps"] + 1):
        t0 = time.perf_counter()
        train_step()
        if save is not None and step % opts["every"] == 0:
            if pending is not None:
                pending.result()  # the previous save still running: waited for here
            saves.append({"step": step, "start_unix": time.time()})
            state = {f"rank{rank}": {"model": model.state_dict(), "optim": opt.state_dict()}}
            pending = save(step, state)
        times.append(time.perf_counter() - t0)
    if pending is not None:
        pending.result()
    Path(opts["results_dir"], f"rank{rank}.json").write_text(json.dumps({"times": times, "saves": saves}))
    dist.barrier()
    dist.destroy_process_group()


# ---- the driver ---------------------------------------------------------------

def pct(values, q):
    v = sorted(values)
    return v[min(len(v) - 1, int(round(q * (len(v) - 1))))]


class PairAgent(AgentProcess):
    """One agent of the pair: its socket and log in the run's directory, its root on the tmpfs."""

    error = BenchError
    poll_s = 0.1
    stop_timeout_s = 60

    def __init__(self, workdir: Path, node: str, cli: Path):
        super().__init__(workdir / f"{node}.sock", cli=cli, output=workdir / f"{node}.log")
        self.name = f"tierckptd {node}"
        self.root = SHM / f"tc-interf-{uuid.uuid4().hex[:10]}"


class AgentPair:
    """n1 (the trainer's agent: durable tier + replication) and n2 (its replica holder)."""

    def __init__(self, workdir: Path, build: Path, caps_args: list[str], budget: str):
        self.workdir = workdir
        binaries = Binaries.under(build / "tools")
        secret = workdir / "secret"
        secret.write_bytes(os.urandom(32))
        secret.chmod(0o600)
        hosts = workdir / "hosts"
        write_hostfile(hosts, 2)
        self.durable = workdir / "durable"
        self.nodes: list[PairAgent] = []
        try:
            for node in ("n1", "n2"):
                a = PairAgent(workdir, node, binaries.cli)
                args = [binaries.agent, "--socket", a.socket, "--root", a.root, "--memory-budget", budget,
                        "--node-id", node, "--peers", hosts, "--peer-secret-file", secret,
                        "--replicas", "2", "--replica-ack", "none", "--keep-last", "2", *caps_args]
                if node == "n1":
                    args += ["--durable", self.durable, "--persist-every", "1", "--durable-keep", "2"]
                self.nodes.append(a.launch(args, wait=False))
            for a in self.nodes:
                a.wait_ready()
        except BaseException:
            self.stop()
            raise

    def cpu_s(self) -> float:
        """CPU seconds (user + system) both agents have used so far, from /proc/<pid>/stat."""
        total = 0
        for a in self.nodes:
            fields = Path(f"/proc/{a.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of stat(5))
        return total / os.sysconf("SC_CLK_TCK")

    def logged_at(self, ns: str, event: str) -> dict[int, float]:
        """step -> unix time of n1's first `event` log line for it (persist, commit). The first: an agent
        before decision 167 also logged `persist` for retention's check of a durable copy, when the step
        was dropped two saves later, which read as the step becoming durable that late."""
        out = {}
        for line in self.nodes[0].log.read_text(errors="replace").splitlines():
            if f" event={event} " not in line or f"ns={ns} " not in line:
                continue
            ts = re.search(r"ts=(\S+)", line)
            step = re.search(r" step=(\d+)", line)
            if ts and step:
                t = datetime.datetime.strptime(ts.group(1), "%Y-%m-%dT%H:%M:%S.%fZ")
                out.setdefault(int(step.group(1)), t.replace(tzinfo=datetime.timezone.utc).timestamp())
        return out

    def stop(self):
        stop_all(self.nodes)
        for a in self.nodes:
            shutil.rmtree(a.root, ignore_errors=True)


def find_dlrover(venv: Path) -> tuple[str | None, str]:
    py = venv / "bin" / "python"
    if not py.exists():
        return None, f"{venv} not found (bench/peers.py builds it)"
    r = subprocess.run([str(py), "-c", "import dlrover.trainer.torch.flash_checkpoint.ddp, torch"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        return None, f"dlrover does not import in {venv}: {r.stderr.strip().splitlines()[-1:]}"
    return str(py), ""


def run_one(args, mode: str, workdir: Path, python: str) -> dict:
    run_dir = workdir / f"{mode}-{uuid.uuid4().hex[:6]}"
    run_dir.mkdir()
    results = run_dir / "results"
    results.mkdir()
    agents = None
    opts = {"mode": mode, "hidden": args.hidden, "layers": args.layers, "batch": args.batch,
            "steps": args.steps, "every": args.every, "warmup": args.warmup, "results_dir": str(results),
            "namespace": f"interf-{uuid.uuid4().hex[:8]}", "socket": "", "dlrover_dir": str(run_dir / "dlrover")}
    try:
        if mode in ("tierckpt", "tierckpt_caps"):
            caps = ["--background-priority", "normal"]
            if mode == "tierckpt_caps":
                caps = ["--persist-rate", args.persist_rate, "--replicate-rate", args.replicate_rate,
                        "--background-priority", args.priority]
            agents = AgentPair(run_dir, args.build_dir, caps, args.budget)
            opts["socket"] = str(agents.nodes[0].socket)
        env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(REPO / "bench"))
        cmd = [python, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
               str(Path(__file__).resolve()), "--worker", json.dumps(opts)]
        r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=args.timeout)
        if r.returncode != 0:
            raise BenchError(f"{mode}: torchrun failed ({r.returncode}):\n{r.stdout[-2000:]}\n{r.stderr[-4000:]}")
        ranks = [json.loads((results / f"rank{i}.json").read_text()) for i in range(2)]
        times = [max(a, b) for a, b in zip(ranks[0]["times"], ranks[1]["times"])]
        out = {"times": times}
        if agents is not None:
            deadline = time.time() + 120  # the last saves may still be persisting
            want = [s["step"] for s in ranks[0]["saves"]]
            while True:
                done = agents.logged_at(opts["namespace"], "persist")
                if all(s in done for s in want) or time.time() > deadline:
                    break
                time.sleep(0.2)
            interval = args.every * statistics.median(times)
            out["durable_s"] = [done[s["step"]] - s["start_unix"] for s in ranks[0]["saves"] if s["step"] in done]
            committed = agents.logged_at(opts["namespace"], "commit")
            out["commit_s"] = [committed[s["step"]] - s["start_unix"] for s in ranks[0]["saves"]
                               if s["step"] in committed]
            out["missing_durable"] = [s for s in want if s not in done]
            out["interval_s"] = interval
            out["agent_cpu_s"] = agents.cpu_s()  # every checkpoint persisted (or given up on) by now
        return out
    finally:
        if agents is not None:
            agents.stop()
        shutil.rmtree(run_dir, ignore_errors=True)
        for seg in SHM.glob("*_ckpt_shm_*"):  # DLRover's leftovers
            if mode == "dlrover":
                seg.unlink(missing_ok=True)


def summarize(runs: dict, skipped: dict) -> tuple[dict, dict]:
    results, ratios = {}, {}
    base = statistics.median(runs["none"]["times"])
    for mode, r in runs.items():
        t = r["times"]
        entry = {"steps": len(t), "median_ms": 1e3 * statistics.median(t), "p90_ms": 1e3 * pct(t, 0.9)}
        if "durable_s" in r:
            d = r["durable_s"]
            entry.update({"checkpoints": len(d) + len(r["missing_durable"]),
                          "durable_median_s": statistics.median(d) if d else None,
                          "durable_max_s": max(d) if d else None,
                          "commit_median_s": statistics.median(r["commit_s"]) if r["commit_s"] else None,
                          "interval_s": statistics.median(r["interval_s"]),
                          "missing_durable": len(r["missing_durable"]),
                          "within_cadence": sum(x <= i for x, i in zip(d, r["interval_list"])),
                          "agent_cpu_s_per_checkpoint": sum(r["agent_cpu_s"]) / max(1, len(d) + len(r["missing_durable"]))})
        results[mode] = entry
        ratios[mode] = {"median": entry["median_ms"] / (1e3 * base), "p90": entry["p90_ms"] / (1e3 * base)}
    for mode, why in skipped.items():
        results[mode] = {"skipped": why}
    return results, ratios


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--json", action="store_true")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=60, help="timed steps per run (default 60)")
    p.add_argument("--every", type=int, default=10, help="checkpoint every N steps (default 10)")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--hidden", type=int, default=1024)
    p.add_argument("--layers", type=int, default=3)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--persist-rate", default="64MiB")
    p.add_argument("--replicate-rate", default="64MiB")
    p.add_argument("--priority", default="low", choices=("normal", "low", "idle"))
    p.add_argument("--budget", default="2GiB", help="each agent's --memory-budget")
    p.add_argument("--build-dir", type=Path, default=REPO / "build" / "release")
    p.add_argument("--peers-venv", type=Path, default=REPO / "build" / "peers-venv")
    p.add_argument("--configs", default=",".join(CONFIGS))
    p.add_argument("--timeout", type=int, default=1200, help="seconds per torchrun")
    args = p.parse_args()
    if args.worker:
        worker(json.loads(args.worker))
        return 0
    if not (args.build_dir / "tools" / "tierckptd" / "tierckptd").exists():
        print(f"tierckptd missing under {args.build_dir}; build first (scripts/setup.sh release)", file=sys.stderr)
        return 2
    configs = [c for c in args.configs.split(",") if c]
    if "none" not in configs or any(c not in CONFIGS for c in configs):
        print(f"--configs must include none and name only {CONFIGS}", file=sys.stderr)
        return 2
    skipped = {}
    dlrover_py = None
    if "dlrover" in configs:
        dlrover_py, why = find_dlrover(args.peers_venv)
        if dlrover_py is None:
            skipped["dlrover"] = why
            configs.remove("dlrover")
    runs = {c: {"times": [], "durable_s": [], "commit_s": [], "missing_durable": [], "interval_s": [],
                "interval_list": [], "agent_cpu_s": []}
            for c in configs}
    workdir = Path(tempfile.mkdtemp(prefix="tc-interference-", dir="/var/tmp"))
    peer_failures: dict[str, list[str]] = {}  # a peer's failed rounds: reported, the run goes on
    try:
        for rnd in range(args.rounds):
            for mode in configs:
                python = dlrover_py if mode == "dlrover" else sys.executable
                try:
                    r = run_one(args, mode, workdir, python)
                except BenchError as e:
                    if mode != "dlrover":
                        raise  # tierckpt's own failure fails the benchmark
                    why = next((ln.strip() for ln in str(e).splitlines()[::-1]
                                if "Error" in ln and "ChildFailedError" not in ln), str(e).splitlines()[0])
                    peer_failures.setdefault(mode, []).append(f"round {rnd + 1}: {why[:300]}")
                    print(f"interference: {mode} failed in round {rnd + 1} ({why[:300]}); its other rounds count",
                          file=sys.stderr)
                    continue
                agg = runs[mode]
                agg["times"] += r["times"]
                if "durable_s" in r:
                    agg["durable_s"] += r["durable_s"]
                    agg["commit_s"] += r["commit_s"]
                    agg["missing_durable"] += r["missing_durable"]
                    agg["interval_s"].append(r["interval_s"])
                    agg["interval_list"] += [r["interval_s"]] * len(r["durable_s"])
                    agg["agent_cpu_s"].append(r["agent_cpu_s"])
                if not args.json:
                    print(f"round {rnd + 1}/{args.rounds} {mode}: median step "
                          f"{1e3 * statistics.median(r['times']):.1f} ms", file=sys.stderr)
    except BenchError as e:
        print(f"interference: {e}", file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    for mode, failures in peer_failures.items():
        if not runs[mode]["times"]:
            del runs[mode]
            skipped[mode] = f"failed in every round: {failures[0]}"
    for agg in runs.values():
        if not agg["durable_s"] and not agg["missing_durable"]:
            for k in ("durable_s", "commit_s", "missing_durable", "interval_s", "interval_list", "agent_cpu_s"):
                agg.pop(k)
    results, ratios = summarize(runs, skipped)
    state_mib = 3 * args.layers * (args.hidden * args.hidden + args.hidden) * 4 / (1 << 20)
    config = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items() if k != "worker"}
    config["state_per_rank_mib"] = round(state_mib, 1)
    try:
        from machine import machine_info

        machine = machine_info()
    except Exception as e:  # noqa: BLE001 (the figures matter more than the machine record)
        machine = {"error": str(e)}
    if args.json:
        print(json.dumps({"machine": machine, "command": " ".join(sys.argv), "config": config,
                          "results": results, "ratios": ratios, "peer_failures": peer_failures}, indent=1))
        return 0
    for mode, failures in peer_failures.items():
        print(f"{mode}: failed in {len(failures)} of {args.rounds} rounds ({'; '.join(failures)})")
    print(f"state per rank: {state_mib:.0f} MiB (params + AdamW), checkpoint every {args.every} steps, "
          f"{args.rounds} rounds x {args.steps} steps; caps: persist {args.persist_rate}/s, replicate "
          f"{args.replicate_rate}/s, priority {args.priority}")
    print(f"{'config':<15}{'median ms':>10}{'p90 ms':>9}{'x none':>8}{'p90 x':>8}{'commit s':>10}"
          f"{'durable med s':>15}{'max s':>8}{'in cadence':>12}{'agent cpu s/ckpt':>18}")
    for mode in CONFIGS:
        r = results.get(mode)
        if r is None:
            continue
        if "skipped" in r:
            print(f"{mode:<15}skipped: {r['skipped']}")
            continue
        line = (f"{mode:<15}{r['median_ms']:>10.1f}{r['p90_ms']:>9.1f}{ratios[mode]['median']:>8.3f}"
                f"{ratios[mode]['p90']:>8.3f}")
        if "checkpoints" not in r and mode != "none":
            line += f"{'-':>10}"
        if "checkpoints" in r:
            cm = f"{r['commit_median_s']:.2f}" if r["commit_median_s"] is not None else "-"
            line += f"{cm:>10}"
            dm = f"{r['durable_median_s']:.2f}" if r["durable_median_s"] is not None else "-"
            dx = f"{r['durable_max_s']:.2f}" if r["durable_max_s"] is not None else "-"
            line += f"{dm:>15}{dx:>8}{r['within_cadence']:>6}/{r['checkpoints']:<5}"
            line += f"{r['agent_cpu_s_per_checkpoint']:>18.3f}"
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
