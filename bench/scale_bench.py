#!/usr/bin/env python3
"""scale_bench.py - one step spanning N real agents on this machine (issue 21 item 4).

    python bench/scale_bench.py [--nodes 2,4,8,16,32] [--objects 2] [--size 4MiB] [--kill 0]
                                [--commit-fan-out K] [--json] [--build-dir build/release]

For each N: N tierckptd processes (n1..nN, each its own tmpfs root, socket, peer port and
metrics port, one hostfile and secret, --replicas 2, one shared durable directory). Every
node's writer (tc_test_writer) writes and seals its part, --objects objects of --size bytes,
and holds it; n1's writer then commits the step across all N (CommitStep with members: n1
commits every other member's part through the peers, down the commit tree of fan-out
--commit-fan-out, the agents' default 16 when not given (decision 102), each part replicated
to its ring successor before its commit returns) with --persist. Reported per N:

  commit_s        n1's writer, from the commit request to its answer (the spanning commit,
                  replicas included: --replica-ack all)
  durable_s       from that answer until the merged manifest is in the durable directory
                  (every member uploads its part and part record; one merges: decision 87)
  busiest_mib     the largest replicate + persist bytes one agent moved (its /metrics)
  per_node_s      commit_s / N and durable_s / N, to read the growth
  depth           the commit tree's depth, from n1's `commit_across_nodes` log line (None with
                  agents from before the tree)
  request_bytes   the largest commit request any agent received, from the agents'
                  `subtree_committed` log lines (None with agents from before decision 108, which
                  do not log it): the members travel as runs of ring places, so it does not grow
                  with N

With --kill K (at the largest N only): K agents other than n1 and its holder are SIGKILLed
right after the commit, during persistence; the step must still become durable (their
holders upload their parts, `part_takeover`) and restore byte-identical from the durable
tier alone. That run takes --takeover-after 1 s and --persist-rate 4MiB, so that each part's
upload lasts long enough for the kills to land in it; it reports the `part_takeover` lines the
agents logged.

CI runs a reduced version (tests/integration/test_scale_bench.py: N = 2, 4, 8, one kill).
Output: a table, or with --json one JSON object {"machine", "command", "git", "config",
"results"}. Exit status 0; 1 when a run fails (with the log tails); 2 on bad arguments.
"""
from __future__ import annotations

import argparse
import json
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "harness"))
from agent_harness import REPO, AgentProcess, Binaries, free_ports, git_info, write_hostfile  # noqa: E402
from machine import machine_info  # noqa: E402
from replication_bench import parse_size  # noqa: E402  (sizes as the other benchmarks take them)

SHM = Path("/dev/shm")
MiB = 1 << 20
NS = "scale"
STEP = 1


class BenchError(Exception):
    pass


def metric(port: int, name: str) -> float:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    m = re.search(rf"^{re.escape(name)}(?:{{[^}}]*}})? ([0-9.e+]+)$", text, re.M)
    return float(m.group(1)) if m else 0.0


class Cluster:
    def __init__(self, bins: Binaries, n: int, work: Path, takeover_s: int, fan_out: int = 0):
        self.bins, self.n, self.work = bins, n, work
        self.durable = work / "durable"
        self.durable.mkdir()
        secret = work / "secret"
        secret.write_bytes(b"scale-bench-cluster-secret-0123456789\n")
        secret.chmod(0o600)
        hosts = work / "hosts"
        write_hostfile(hosts, n)
        self.metrics_ports = free_ports(n)
        self.agents: dict[str, AgentProcess] = {}
        self.roots: list[Path] = []
        for i in range(n):
            node = f"n{i + 1}"
            root = SHM / f"tierckpt-scale-{uuid.uuid4().hex[:10]}"
            self.roots.append(root)
            a = AgentProcess(work / f"{node}.sock", cli=bins.cli, output=work / f"{node}.log")
            a.node = node
            a.argv = [str(bins.agent), "--socket", str(a.socket), "--root", str(root), "--durable",
                      str(self.durable), "--memory-budget", "256MiB", "--node-id", node, "--peers", str(hosts),
                      "--peer-secret-file", str(secret), "--replicas", "2", "--takeover-after", str(takeover_s),
                      "--metrics-listen", f"127.0.0.1:{self.metrics_ports[i]}", "--log-level", "info",
                      *(["--persist-rate", "4MiB"] if takeover_s < 60 else []),
                      *(["--commit-fan-out", str(fan_out)] if fan_out else [])]
            self.agents[node] = a
        try:
            for a in self.agents.values():
                a.launch(a.argv, wait=False)
            for a in self.agents.values():
                a.wait_ready()
        except BaseException:
            self.stop()  # the agents that did start (one that could not bind its port fails them all)
            raise

    def stop(self):
        for a in self.agents.values():
            a.kill()
        for r in self.roots:
            shutil.rmtree(r, ignore_errors=True)

    def log_tails(self) -> str:
        return "\n".join(f"--- {node}:\n{a.log_text()[-1500:]}" for node, a in self.agents.items())


def run_one(bins: Binaries, n: int, objects: int, size: int, kill: int, fan_out: int = 0) -> dict:
    work = Path(tempfile.mkdtemp(prefix=f"tierckpt-scale-{n}-"))
    c = Cluster(bins, n, work, takeover_s=1 if kill else 60, fan_out=fan_out)
    holders = []
    try:
        members = [f"n{i + 1}" for i in range(n)]
        for node in members[1:]:
            p = subprocess.Popen([str(bins.writer), "--socket", str(c.agents[node].socket), "--ns", NS, "--step",
                                  str(STEP), "--objects", str(objects), "--size", str(size), "--prefix", f"{node}_",
                                  "--seed", str(members.index(node) + 1), "--ref-dir", str(work / "ref"),
                                  "--no-commit", "--hold"],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            holders.append(p)
        for p in holders:
            line = p.stdout.readline()
            if not line.startswith("SEALED"):
                raise BenchError(f"a part's writer did not seal: {line!r} {p.stderr.read()[-2000:]}")
        t0 = time.monotonic()
        r = subprocess.run([str(bins.writer), "--socket", str(c.agents["n1"].socket), "--ns", NS, "--step",
                            str(STEP), "--objects", str(objects), "--size", str(size), "--prefix", "n1_",
                            "--ref-dir", str(work / "ref"), "--members", ",".join(members), "--persist"],
                           capture_output=True, text=True, timeout=600)
        commit_s = time.monotonic() - t0
        if r.returncode != 0:
            raise BenchError(f"the spanning commit failed: {r.stderr[-3000:]}\n{c.log_tails()}")
        for p in holders:
            p.stdin.close()
            p.wait(timeout=30)
        killed = []
        if kill:
            # Not n1 (it committed) nor n2 (n1's holder): agents whose parts their holders must upload.
            for node in members[2:2 + kill * 2:2][:kill]:
                c.agents[node].kill(signal.SIGKILL)
                killed.append(node)
        manifest = c.durable / NS / f"step_{STEP:010d}" / "_tierckpt_manifest.json"
        t1 = time.monotonic()
        while not manifest.exists():
            if time.monotonic() - t1 > 300:
                raise BenchError(f"N={n}: the step did not become durable in 300 s\n{c.log_tails()}")
            time.sleep(0.01)
        durable_s = time.monotonic() - t1
        merged = json.loads(manifest.read_text())
        if len(merged["objects"]) != n * objects:
            raise BenchError(f"N={n}: the durable manifest lists {len(merged['objects'])} objects, not {n * objects}")
        # A member counts its persisted bytes when its persist ends, which may be just after the
        # manifest appeared (it learns of it by reading): wait for every live member's count.
        live = [i for i, node in enumerate(members) if node not in killed]
        t2 = time.monotonic()
        while (any(metric(c.metrics_ports[i], "tierckpt_persist_bytes_total") == 0 for i in live)
               and time.monotonic() - t2 < 30):
            time.sleep(0.05)
        moved = []
        for i, node in enumerate(members):
            if node in killed:
                continue
            port = c.metrics_ports[i]
            moved.append(metric(port, "tierckpt_replicate_bytes_total") + metric(port, "tierckpt_persist_bytes_total"))
        takeovers = sum(a.log_text().count("part_takeover") for a in c.agents.values())
        restored_ok = None
        if kill:
            # Byte-identical from the durable tier alone: a fresh agent with an empty root and no peers.
            solo = AgentProcess(work / "solo.sock", cli=bins.cli, output=work / "solo.log")
            root = SHM / f"tierckpt-scale-{uuid.uuid4().hex[:10]}"
            solo.launch([str(bins.agent), "--socket", str(solo.socket), "--root", str(root), "--durable",
                         str(c.durable), "--memory-budget", "1GiB"])
            try:
                out = work / "restored"
                rr = subprocess.run([str(bins.cli), "--socket", str(solo.socket), "restore", NS, str(STEP), "--to",
                                     str(out)], capture_output=True, text=True, timeout=300)
                restored_ok = rr.returncode == 0 and all(
                    (out / f.name).read_bytes() == f.read_bytes() for f in (work / "ref").iterdir())
            finally:
                solo.kill()
                shutil.rmtree(root, ignore_errors=True)
            if not restored_ok:
                raise BenchError(f"N={n}: the step did not restore byte-identical after {killed} were killed")
        depth = re.search(r"event=commit_across_nodes .*?depth=(\d+)", c.agents["n1"].log_text())
        requests = [int(b) for a in c.agents.values()
                    for b in re.findall(r"event=subtree_committed .*?request_bytes=(\d+)", a.log_text())]
        return {"nodes": n, "depth": int(depth.group(1)) if depth else None,
                "request_bytes": max(requests) if requests else None, "objects_per_node": objects,
                "object_bytes": size, "commit_s": round(commit_s, 3),
                "durable_s": round(durable_s, 3), "busiest_mib": round(max(moved) / MiB, 1),
                "commit_s_per_node": round(commit_s / n, 4), "durable_s_per_node": round(durable_s / n, 4),
                "killed": killed, "takeover_log_lines": takeovers, "restored_byte_identical": restored_ok}
    finally:
        for p in holders:
            if p.poll() is None:
                p.kill()
        c.stop()
        shutil.rmtree(work, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", default="2,4,8,16,32")
    ap.add_argument("--objects", type=int, default=2)
    ap.add_argument("--size", type=parse_size, default=4 * MiB)
    ap.add_argument("--kill", type=int, default=0, help="agents to SIGKILL during persistence at the largest N")
    ap.add_argument("--commit-fan-out", type=int, default=0,
                    help="the agents' --commit-fan-out (default: theirs, 16)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--build-dir", default=str(REPO / "build" / "release"))
    args = ap.parse_args()
    try:
        nodes = [int(x) for x in args.nodes.split(",")]
    except ValueError:
        ap.error(f"--nodes {args.nodes!r}: give node counts separated by commas, e.g. 2,4,8")
    if any(n < 2 for n in nodes) or (args.kill and args.kill > (max(nodes) - 2) // 2):
        ap.error("--nodes must be >= 2 each; --kill at most (largest N - 2) / 2")
    bins = Binaries.under(Path(args.build_dir) / "tools")
    if bins.missing():
        print(f"scale_bench: missing {bins.missing()}; build first: scripts/setup.sh release", file=sys.stderr)
        return 2
    results = []
    try:
        for n in nodes:
            results.append(run_one(bins, n, args.objects, args.size, args.kill if n == max(nodes) else 0,
                                   args.commit_fan_out))
            if not args.json:
                r = results[-1]
                print(f"N={n:3d}  depth {r['depth']}  request {r['request_bytes']} B  commit {r['commit_s']:7.3f} s "
                      f"({r['commit_s_per_node']:.4f}/node)  durable "
                      f"{r['durable_s']:7.3f} s ({r['durable_s_per_node']:.4f}/node)  busiest {r['busiest_mib']} MiB"
                      + (f"  killed {r['killed']}, {r['takeover_log_lines']} part_takeover log lines, restored "
                         "byte-identical" if r["killed"] else ""), flush=True)
    except BenchError as e:
        print(f"scale_bench: {e}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps({"machine": machine_info(), "command": " ".join(sys.argv), "git": git_info(),
                          "config": vars(args), "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
