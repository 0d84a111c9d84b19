#!/usr/bin/env python3
"""redundancy_bench.py - rs:4+2 parity against replication, real agents on this machine (issue 23 item 5).

    python bench/redundancy_bench.py [--json] [--save-size 64MiB] [--objects 4] [--rounds 5] [--warmup 2]
                                     [--restores 3] [--agents 6] [--ec-piece-mib 64] [--ec-rounds 7]
                                     [--build-dir build/release]

The driver of bench/replication_bench.py (its Agent, its writer, the shared harness
tests/harness/agent_harness.py), run over three clusters of --agents real agents each,
all started at once, every agent with its own tmpfs root and port, each cluster with its
own hostfile and secret, --keep-last 1 (decision 145 says why these choices):

  none       --replicas 1: no copy of a step anywhere but its node.
  replicas2  --replicas 2 --replica-ack all: the commit returns once the replica is
             verified on its holder, so the step is protected when the commit returns.
  rs42       --replicas 1 --redundancy rs:4+2: parity alone (decision 142). The commit
             does not wait for parity (decision 136); the step is protected once every
             member reports it redundant.

Phases, in this order, on the same bytes:

  encode     build/release/bench/ec_bench --k 4 --m 2 (the Reed-Solomon code alone:
             encode, fold piece by piece, rebuild, each as a multiple of a memcpy of
             the same pieces in the same round).
  commit     --warmup untimed then --rounds timed rounds; each round runs the three
             configurations one after the other, their order rotated every round.
             In a configuration's turn every agent of its cluster commits a step of
             --save-size bytes in --objects objects (tc_test_writer) at the same moment.
             commit_s: the wall time until every commit returned (as `save` mode of
             replication_bench.py). protected_s: from the same start until the step is
             protected on every node, read from the agents' logs (their ts= field):
             rs42 the last member's `parity_sent ... redundant=true` (what turns the
             step `redundant` in `tierckpt agent status`); replicas2 the last holder's
             `replica_held` (inside the commit, ack=all); none has no protection.
             Every rs42 round is checked redundant on every member (status --json)
             before the next configuration starts, so no background fold overlaps it.
  memory     after the last round, once the members' retention has dropped older
             steps and their parity: the bytes each root's files take in tmpfs
             (st_blocks, as du counts them), summed over the cluster, split into the
             last step's memory-tier, replica-tier and parity files ("committed", the
             figure of the target), files of older steps still held (replicas: see
             settle()), and the rest (the pool's recycled segments, trash), each over
             the state's bytes (agents x --save-size). rs42's parity bytes are also
             summed from status --json (peers.parity.held_bytes) as a cross-check.
  restore    --restores times, the two redundant configurations alternated: one node
             (a data member of parity group 0) is SIGKILLed and restarted on an empty
             root (a replacement) and `tierckpt restore` brings its part of the last
             step back. Time: rs42 its `restored_from_parity ... ms=` log line (group
             record, survivors fetched, rebuilt, checked, published in memory);
             replicas2 its `restore ... ms=` (fetched from the holder, checked,
             published in memory). Neither counts the copy out to --to.

Ratios: rs42 over replicas2 for commit, protection point, memory and restore
throughput; each configuration's commit over none's. Targets (issue 23): memory
rs42 <= 1.55x the state (replicas2 2.0x); rs42 commit <= 1.3x replicas2's.
Medians over the timed rounds. GB/s = 1e9 bytes/s.

Output: a readable table, or with --json ONE JSON object
{"machine", "command", "git", "config", "results", "ratios"}.
Exit status: 0; 1 when a run fails (with the agent's log tail); 2 on bad
arguments or missing binaries (build first: scripts/setup.sh release).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import replication_bench as rb  # noqa: E402  (bench/replication_bench.py: Agent, parse_size, BenchError)
from agent_harness import REPO, git_info, write_hostfile  # noqa: E402  (tests/harness, on sys.path via rb)
from machine import machine_info  # noqa: E402  (bench/machine.py)

BenchError = rb.BenchError
NS = "e"
K, M = 4, 2
CONFIGS = {
    "none": ["--replicas", "1"],
    "replicas2": ["--replicas", "2", "--replica-ack", "all"],
    "rs42": ["--replicas", "1", "--redundancy", f"rs:{K}+{M}"],
}
TS = r"ts=(\S+) level=\w+ "


def log_time(ts: str) -> float:
    """A log line's ts= (UTC, milliseconds) as seconds since the epoch, the clock of time.time()."""
    return datetime.strptime(ts, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc).timestamp()


class Cluster:
    """The agents of one configuration, sharing a hostfile and a secret; each with its own port and
    root (/dev/shm/tierckpt-ecbench-<pid>-<config>-<node>)."""

    def __init__(self, name, build, work, n, budget, flags):
        self.name = name
        self.work = work / name
        self.work.mkdir(parents=True)
        secret = self.work / "secret"
        secret.write_bytes(os.urandom(32))
        secret.chmod(0o600)  # a secret file others can read is refused (decision 83)
        hosts = self.work / "hosts"
        write_hostfile(hosts, n)
        extra = ["--memory-budget", budget, "--peers", hosts, "--peer-secret-file", secret, *flags]
        self.agents = [rb.Agent(build, self.work, f"n{i + 1}", extra,
                                root=rb.SHM / f"tierckpt-ecbench-{os.getpid()}-{name}-n{i + 1}")
                       for i in range(n)]

    def launch(self):
        for a in self.agents:
            a.start(wait=False)

    def wait_ready(self):
        for a in self.agents:
            a.wait_ready(60)

    def close(self):
        for a in self.agents:
            a.kill()
            a.wipe()

    def status(self, agent) -> dict:
        return json.loads(agent.cli("agent", "status", "--json").stdout)

    def log_times(self, pattern: str) -> list[float]:
        """The ts= of every line matching pattern (after "ts=... level=... ") in every agent's log."""
        out = []
        for a in self.agents:
            out += [log_time(ts) for ts in re.findall(TS + pattern, a.log.read_text(errors="replace"))]
        return out

    def wait_log_times(self, pattern: str, count: int, timeout: float = 120) -> list[float]:
        deadline = time.time() + timeout
        while time.time() < deadline:
            found = self.log_times(pattern)
            if len(found) >= count:
                return found
            time.sleep(0.02)
        raise BenchError(f"{self.name}: {len(self.log_times(pattern))} of {count} log lines matching {pattern!r} "
                         f"after {timeout:g} s; n1's log:\n{self.agents[0].log_tail()}")


# ---- commit ------------------------------------------------------------------

def commit_round(c: Cluster, step: int, objects: int, per_object: int) -> dict:
    t0 = time.time()
    p0 = time.perf_counter()
    procs = [a.writer(NS, step, objects, per_object) for a in c.agents]
    for a, p in zip(c.agents, procs):
        _, err = p.communicate(timeout=900)
        if p.returncode != 0:
            raise BenchError(f"{c.name}: writer on {a.node} failed: {err}\n{a.log_tail()}")
    row = {"step": step, "commit_s": time.perf_counter() - p0}
    n = len(c.agents)
    if c.name == "rs42":
        sent = rf"event=parity_sent ns={NS} step={step} group=\d+ redundant="
        done = c.wait_log_times(sent + r"\w+", n)
        if len(c.log_times(sent + "true")) != n:
            raise BenchError(f"rs42 step {step}: a member sent its parity and is not redundant; "
                             + " / ".join(a.log_tail()[-600:] for a in c.agents))
        row["protected_s"] = max(done) - t0
        # Where it goes: each holder's pull + check + fold of each part (folds of a group run one at a time).
        row["fold_ms"] = sorted(float(ms) for a in c.agents for ms in re.findall(
            rf"event=parity_folded origin=\S+ ns={NS} step={step} group=\d+ folded=\d+ ms=([\d.]+)",
            a.log.read_text(errors="replace")))
        # Where each pull's time went (agents since decision 148 log it; a fold answered from the
        # holder's state, a member asking again, reads nothing and is left out).
        parts = ("ms", "claim_ms", "read_ms", "hash_ms", "wait_ms", "update_ms")
        row["folds"] = [f for a in c.agents for m in re.findall(
            rf"event=parity_folded origin=\S+ ns={NS} step={step} group=\d+ folded=\d+ ms=([\d.]+) "
            r"claim_ms=([\d.]+) read_ms=([\d.]+) hash_ms=([\d.]+) wait_ms=([\d.]+) update_ms=([\d.]+)",
            a.log.read_text(errors="replace")) for f in [dict(zip(parts, map(float, m)))] if f["read_ms"] > 0]
        row["seal_ms"] = sorted(float(ms) for a in c.agents for ms in re.findall(
            rf"event=parity_sealed ns={NS} step={step} group=\d+ bytes=\d+ ms=([\d.]+)",
            a.log.read_text(errors="replace")))
        for a in c.agents:  # what `tierckpt agent status` says, checked outside the timed span
            states = {s["step"]: s["state"] for s in c.status(a)["peers"]["parity"]["steps"] if s["ns"] == NS}
            if states.get(step) != "redundant":
                raise BenchError(f"rs42: {a.node} reports step {step} {states.get(step)!r}, not redundant")
    elif c.name == "replicas2":
        held = c.wait_log_times(rf"event=replica_held origin=\S+ ns={NS} step={step} ms=", n)
        row["protected_s"] = max(held) - t0
    return row


def settle(c: Cluster, step: int, timeout: float = 20) -> bool:
    """Waits until no file of a step other than `step` is left in the members' memory tiers or the
    parity holders' directories (the members' retention drops older steps and their parity just after
    a commit; emptied step directories may stay, decision 131); False after timeout. Replica tiers are
    not waited for: a replica is held through MemoryTier::Restore, which applies no --keep-last, so
    older replicas stay until the budget evicts them (counted as "older_steps" by memory())."""
    name = f"step_{step:010d}"
    deadline = time.time() + timeout
    while time.time() < deadline:
        stale = [f for a in c.agents for top in ("ns", "parity") for f in (a.root / top).rglob("*")
                 if f.is_file() and any(x.startswith("step_") and not x.startswith(name) for x in f.parts)]
        if not stale:
            return True
        time.sleep(0.1)
    return False


# ---- memory ------------------------------------------------------------------

def memory(c: Cluster, step: int, state_bytes: int) -> dict:
    """Bytes of the files below each root as tmpfs holds them (st_blocks x 512), summed over c: the last
    step's files in the memory tier, replica tier and parity directories ("committed"), files of older
    steps still held, and the rest (the pool's recycled segments, trash, agent.lock)."""
    name = f"step_{step:010d}"
    parts = {"memory_tier": 0, "replica_tier": 0, "parity": 0, "older_steps": 0, "pool_and_other": 0}
    for a in c.agents:
        for dirpath, _, files in os.walk(a.root):
            rel = Path(dirpath).relative_to(a.root).parts
            for f in files:
                held = os.lstat(os.path.join(dirpath, f)).st_blocks * 512
                if name in rel:
                    kind = {"ns": "memory_tier", "replicas": "replica_tier", "parity": "parity"}.get(
                        rel[0], "pool_and_other")
                elif rel and rel[0] in ("ns", "replicas", "parity") and any(x.startswith("step_") for x in rel):
                    kind = "older_steps"
                else:
                    kind = "pool_and_other"
                parts[kind] += held
    committed = parts["memory_tier"] + parts["replica_tier"] + parts["parity"]
    total = sum(parts.values())
    return {"bytes": parts, "committed_bytes": committed, "total_bytes": total, "state_bytes": state_bytes,
            "committed_x_state": committed / state_bytes, "total_x_state": total / state_bytes}


# ---- restore -----------------------------------------------------------------

def victim_of(c: Cluster) -> rb.Agent:
    """rs42: a data member of parity group 0 (a whole group of K); the others: n1."""
    if c.name != "rs42":
        return c.agents[0]
    for a in c.agents:
        if c.status(a)["peers"]["parity"]["group"] == 0:
            return a
    raise BenchError("rs42: no agent reports parity group 0")


def restore_once(c: Cluster, victim: rb.Agent, step: int, part_bytes: int, work: Path) -> float:
    """SIGKILL victim, restart it on an empty root, `tierckpt restore` its part of step: seconds from its log."""
    victim.kill()
    victim.wipe()
    victim.start()
    before = victim.log.read_text(errors="replace")
    out = work / f"restore-{c.name}"
    try:
        victim.cli("restore", NS, step, "--to", out)
        got = sum(p.stat().st_size for p in out.rglob("*") if p.is_file() and not p.name.startswith("_tierckpt"))
    finally:
        shutil.rmtree(out, ignore_errors=True)
    if got != part_bytes:
        raise BenchError(f"{c.name}: restore wrote {got} bytes, the part is {part_bytes}")
    new = victim.log.read_text(errors="replace")[len(before):]
    if c.name == "rs42":
        found = re.findall(rf"event=restored_from_parity ns={NS} step={step} group=0 .*? bytes={part_bytes} "
                           r"ms=([\d.]+)", new)
    else:
        found = re.findall(rf"event=restore ns={NS} step={step} bytes={part_bytes} objects=\d+ ms=([\d.]+)", new) \
            if f"event=restored_from_peer ns={NS} step={step}" in new else []
    if len(found) != 1:
        raise BenchError(f"{c.name}: the replacement {victim.node} did not restore step {step} the way measured "
                         f"({'from parity' if c.name == 'rs42' else 'from its replica holder'}):\n{new[-3000:]}")
    return float(found[0]) / 1e3


# ---- encode ------------------------------------------------------------------

def ec_bench(build: Path, piece_mib: int, rounds: int) -> dict:
    r = subprocess.run([str(build / "bench" / "ec_bench"), "--k", str(K), "--m", str(M), "--piece-mib", str(piece_mib),
                        "--rounds", str(rounds), "--json"], capture_output=True, text=True, timeout=600,
                       stdin=subprocess.DEVNULL)
    if r.returncode != 0:
        raise BenchError(f"ec_bench failed ({r.returncode}): {r.stderr}")
    return json.loads(r.stdout)


# ---- run ---------------------------------------------------------------------

def run(args, build: Path, work: Path) -> dict:
    per_object = args.save_size // args.objects
    part = per_object * args.objects
    state = part * args.agents
    print("redundancy_bench.py: ec_bench ...", file=sys.stderr)
    encode = ec_bench(build, args.ec_piece_mib, args.ec_rounds)
    budget = str(max(2 << 30, 8 * part))
    clusters = {name: Cluster(name, build, work, args.agents, budget, flags) for name, flags in CONFIGS.items()}
    names = list(clusters)
    rows = {name: [] for name in names}
    try:
        print(f"redundancy_bench.py: starting {len(names)} x {args.agents} agents ...", file=sys.stderr)
        for c in clusters.values():
            c.launch()
        for c in clusters.values():
            c.wait_ready()
        for r in range(args.warmup + args.rounds):
            print(f"redundancy_bench.py: round {r + 1} of {args.warmup + args.rounds}"
                  f"{' (warm-up)' if r < args.warmup else ''} ...", file=sys.stderr)
            order = names[r % len(names):] + names[:r % len(names)]
            for name in order:
                row = commit_round(clusters[name], r + 1, args.objects, per_object)
                row["warmup"] = r < args.warmup
                row["settled"] = settle(clusters[name], r + 1)
                rows[name].append(row)
        last = args.warmup + args.rounds
        mem = {name: memory(c, last, state) for name, c in clusters.items()}
        # The same parity bytes as the agents count them against their budgets (status --json).
        mem["rs42"]["parity_held_bytes_status"] = sum(
            clusters["rs42"].status(a)["peers"]["parity"]["held_bytes"] for a in clusters["rs42"].agents)
        print("redundancy_bench.py: restores ...", file=sys.stderr)
        restores = {"rs42": [], "replicas2": []}
        victims = {name: victim_of(clusters[name]) for name in restores}
        for i in range(args.restores):
            for name in (["rs42", "replicas2"] if i % 2 == 0 else ["replicas2", "rs42"]):
                restores[name].append(restore_once(clusters[name], victims[name], last, part, work))
    finally:
        for c in clusters.values():
            c.close()
    configs = {}
    for name in names:
        timed = [x for x in rows[name] if not x["warmup"]]
        cfg = {"flags": CONFIGS[name], "rounds": rows[name],
               "commit_median_s": statistics.median(x["commit_s"] for x in timed),
               "commit_gbps": state / statistics.median(x["commit_s"] for x in timed) / 1e9,
               "memory": mem[name]}
        if name != "none":
            cfg["protected_median_s"] = statistics.median(x["protected_s"] for x in timed)
            if name == "rs42":
                cfg["fold_median_ms"] = statistics.median(ms for x in timed for ms in x["fold_ms"])
                folds = [f for x in timed for f in x.get("folds", [])]
                if folds:
                    cfg["fold_breakdown_median_ms"] = {k: statistics.median(f[k] for f in folds) for k in folds[0]}
                seals = [ms for x in timed for ms in x.get("seal_ms", [])]
                if seals:
                    cfg["seal_median_ms"] = statistics.median(seals)
            cfg["restore_s"] = restores[name]
            cfg["restore_median_s"] = statistics.median(restores[name])
            cfg["restore_gbps"] = part / cfg["restore_median_s"] / 1e9
            cfg["restore_victim"] = victims[name].node
        configs[name] = cfg
    groups = math.ceil(args.agents / K)
    return {"bytes_per_agent": part, "state_bytes": state, "encode": encode, "configs": configs,
            "rs42_layout": {"groups": groups, "parity_pieces": groups * M,
                            "expected_x_state": (args.agents + groups * M) / args.agents}}


def ratios(res: dict) -> dict:
    c = res["configs"]
    rs, rep, none = c["rs42"], c["replicas2"], c["none"]
    return {
        "commit_rs42_vs_replicas2": rs["commit_median_s"] / rep["commit_median_s"],
        "protected_rs42_vs_replicas2": rs["protected_median_s"] / rep["protected_median_s"],
        "commit_replicas2_vs_none": rep["commit_median_s"] / none["commit_median_s"],
        "commit_rs42_vs_none": rs["commit_median_s"] / none["commit_median_s"],
        "memory_committed_rs42_vs_replicas2": rs["memory"]["committed_x_state"] / rep["memory"]["committed_x_state"],
        "restore_gbps_rs42_vs_replicas2": rs["restore_gbps"] / rep["restore_gbps"],
        "encode_x_memcpy": res["encode"]["encode_x_memcpy"],
        "targets": "memory rs42 <= 1.55 x state (replicas2 2.0 x); commit rs42 <= 1.3 x replicas2",
    }


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--json", action="store_true")
    p.add_argument("--save-size", type=rb.parse_size, default=64 << 20, help="bytes per agent per step (default 64MiB)")
    p.add_argument("--objects", type=int, default=4, help="objects per step and agent (default 4)")
    p.add_argument("--rounds", type=int, default=5, help="timed rounds; medians reported (default 5)")
    p.add_argument("--warmup", type=int, default=2,
                   help="untimed rounds first (default 2: with --keep-last 1 a tier recycles a step's segments "
                        "from the third step on, as in replication_bench.py)")
    p.add_argument("--restores", type=int, default=3, help="replacements restored per configuration (default 3)")
    p.add_argument("--agents", type=int, default=6, help=f"agents per cluster (default 6; at least {K + M})")
    p.add_argument("--ec-piece-mib", type=int, default=64, help="ec_bench's --piece-mib (default 64)")
    p.add_argument("--ec-rounds", type=int, default=7, help="ec_bench's --rounds (default 7)")
    p.add_argument("--build-dir", default="build/release")
    args = p.parse_args()
    if min(args.objects, args.rounds, args.restores, args.ec_piece_mib, args.ec_rounds) < 1 or args.warmup < 0:
        p.error("--objects, --rounds, --restores, --ec-piece-mib and --ec-rounds must be positive")
    if args.agents < K + M:
        p.error(f"--agents: rs:{K}+{M} needs at least {K + M} agents")
    if args.save_size < args.objects:
        p.error("--save-size must be at least one byte per object")
    build = Path(args.build_dir)
    if not build.is_absolute():
        build = REPO / build
    for b in ("tools/tierckptd/tierckptd", "tools/cli/tierckpt", "tools/testing/tc_test_writer", "bench/ec_bench"):
        if not (build / b).exists():
            print(f"redundancy_bench.py: {build / b} is missing; build first: scripts/setup.sh release",
                  file=sys.stderr)
            sys.exit(2)
    report = {"machine": machine_info(), "command": " ".join([sys.executable, *sys.argv]), "git": git_info(),
              "config": {"save_size": args.save_size, "objects": args.objects, "rounds": args.rounds,
                         "warmup": args.warmup, "restores": args.restores, "agents": args.agents,
                         "ec_piece_mib": args.ec_piece_mib, "ec_rounds": args.ec_rounds}}
    work = Path(tempfile.mkdtemp(prefix="tierckpt-ecbench-"))
    try:
        res = run(args, build, work)
    except BenchError as e:
        print(f"redundancy_bench.py: {e}", file=sys.stderr)
        sys.exit(1)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report["results"] = res
    report["ratios"] = ratios(res)
    if args.json:
        print(json.dumps(report, indent=2))
        return
    c, r, e = res["configs"], report["ratios"], res["encode"]
    mib = res["bytes_per_agent"] / (1 << 20)
    print(f"{args.agents} agents x {mib:g} MiB committed at once; medians of {args.rounds} rounds, "
          f"{args.restores} restores")
    print(f"{'':11} {'commit':>9} {'protected':>10} {'memory (step / all)':>20} {'restore':>13}")
    for name in CONFIGS:
        x = c[name]
        prot = f"{x['protected_median_s']:8.3f} s" if "protected_median_s" in x else f"{'-':>10}"
        rest = f"{x['restore_gbps']:7.3f} GB/s" if "restore_gbps" in x else f"{'-':>12}"
        print(f"{name:11} {x['commit_median_s']:7.3f} s {prot} {x['memory']['committed_x_state']:9.2f}x /"
              f" {x['memory']['total_x_state']:5.2f}x  {rest}")
    print(f"rs42 / replicas2: commit {r['commit_rs42_vs_replicas2']:.2f}x (target <= 1.3), protected "
          f"{r['protected_rs42_vs_replicas2']:.2f}x, memory {c['rs42']['memory']['committed_x_state']:.2f}x the state "
          f"(target <= 1.55; the layout's {res['rs42_layout']['expected_x_state']:.2f}x), restore "
          f"{r['restore_gbps_rs42_vs_replicas2']:.2f}x the throughput")
    print(f"ec_bench rs:{K}+{M}, {e['piece_bytes'] >> 20} MiB pieces: memcpy {e['memcpy_gbps']:.2f} GB/s, encode "
          f"{e['encode_gbps']:.2f} GB/s ({e['encode_x_memcpy']:.2f}x the memcpy's time), update "
          f"{e['update_x_memcpy']:.2f}x, rebuild {e['rebuild_x_memcpy']:.2f}x")


if __name__ == "__main__":
    main()
