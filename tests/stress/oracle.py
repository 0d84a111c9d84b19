"""The oracle: what was acknowledged, which copies the schedule destroyed, and the invariants.

A step is *acknowledged* when tc_test_writer printed COMMITTED: its commit
returned (with --replica-ack all: in the origin's memory and verified in the
holder's) and, since every writer passes --persist --wait-durable, it is
durable. Its promised copies are then mem_origin, mem_holder and durable.
The schedule marks a copy destroyed when it corrupts or truncates it or wipes
the root holding it; nothing ever marks a copy whole again (a restore that
brings a step back from a peer is not counted: the model only loses copies).

Invariants (docs/reliability.md):
  wrong_bytes            a restore that succeeded returned bytes that no writer of that step wrote
  acked_step_lost        an acknowledged step is loadable from no tier, though the schedule left a
                         promised copy (the durable one, or for the newest step a memory one)
  partial_step_visible   after every writer ended, a step is still `writing`, or visible without
                         being whole
  newest_step_evicted    the newest acknowledged step of a namespace is in no agent's memory
                         (own or peer) though a memory copy was left
  agent_died             an agent exited that the schedule did not kill
  double_ack             two racing writers were both acknowledged for one step
  tmpfs_leak             an agent's root holds more than 2 x budget (own tier + one origin's replicas)
  writer_stuck           a writer still ran 120 s after the fault was over
"""
import hashlib
import json
import os
import shutil
import signal
from collections import defaultdict
from contextlib import contextmanager
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from content import step_shas


@dataclass
class Attempt:
    ns: str
    step: int
    node: str
    seed: int
    objects: int
    size: int
    dcp_world: int = 0  # a DCP job of that many ranks (dcp_job.py), checked by loading it; 0: tc_test_writer

    def shas(self):
        return step_shas(self.seed, self.step, self.objects, self.size)


@dataclass
class Acked:
    attempt: Attempt
    t: float
    destroyed: set = field(default_factory=set)  # of "mem_origin", "mem_holder", "durable"


class Violation(Exception):
    def __init__(self, invariant, detail, nodes=()):
        super().__init__(f"{invariant}: {detail}")
        self.invariant = invariant
        self.detail = detail
        self.nodes = list(nodes)
        self.t = time.time()


def sha_file(p: Path):
    h = hashlib.sha256()
    with open(p, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


DCP_JOB = Path(__file__).resolve().parent / "dcp_job.py"
DCP_BYTES_PER_RANK = 4 * 16 * 1024 * 4  # dcp_job.py: TENSORS x ELEMENTS float32


DCP_CHECK_TIMEOUT_S = 180


def run_dcp_check(a: "Attempt", *where):
    """One `dcp_job.py check` in a process of its own (torch imported afresh: seconds)."""
    return subprocess.run([sys.executable, str(DCP_JOB), "check", "--ns", a.ns, "--step", str(a.step), "--seed",
                           str(a.seed), "--world", str(a.dcp_world), *map(str, where)],
                          capture_output=True, text=True, timeout=DCP_CHECK_TIMEOUT_S, stdin=subprocess.DEVNULL)


class DcpChecker:
    """`dcp_job.py serve`: the same check as run_dcp_check, each still in a process of its own (forked
    by the server, which imported torch, DCP and tierckpt once), asked for over a pipe. A check that
    outlasts DCP_CHECK_TIMEOUT_S raises subprocess.TimeoutExpired as run_dcp_check's did (the server
    is killed and the next check starts a new one); a server that dies without answering is restarted
    and asked again once, in a fresh server (counted: `restarts`)."""

    def __init__(self, log: Path):
        self.log = log
        self.proc = None
        self.ready = False
        self.restarts = 0
        self.checks = 0

    def spawn(self):
        """Starts the server without waiting for it (its imports take seconds): the first check waits."""
        if self.proc is None:
            with open(self.log, "ab") as logf:
                self.proc = subprocess.Popen([sys.executable, str(DCP_JOB), "serve"], stdin=subprocess.PIPE,
                                             stdout=subprocess.PIPE, stderr=logf, text=True,
                                             start_new_session=True)
            self.ready = False

    def _start(self):
        self.spawn()
        if self.ready:
            return
        line = self._readline(DCP_CHECK_TIMEOUT_S)
        self.ready = line == "READY\n"
        if line != "READY\n":
            self.close()
            raise RuntimeError(f"dcp_job.py serve did not start (said {line!r}; its log: {self.log})")

    def _readline(self, timeout):
        import selectors  # noqa: PLC0415

        with selectors.DefaultSelector() as sel:
            sel.register(self.proc.stdout, selectors.EVENT_READ)
            if not sel.select(timeout):
                return None
        return self.proc.stdout.readline()

    def close(self):
        if self.proc is None:
            return
        p, self.proc = self.proc, None
        try:
            p.stdin.close()
            p.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            pass
        try:
            os.killpg(p.pid, signal.SIGKILL)  # the server's session: it and any check it forked and left
        except ProcessLookupError:
            pass
        p.wait()
        p.stdout.close()

    def check(self, a: "Attempt", *where):
        req = {"ns": a.ns, "step": a.step, "seed": a.seed, "world": a.dcp_world}
        req[where[0].lstrip("-").replace("-", "_")] = str(where[1])
        cmd = ["dcp_job.py", "check", a.ns, a.step, *where]
        for attempt in (1, 2):
            if self.proc is None or not self.ready:
                self._start()
            try:
                self.proc.stdin.write(json.dumps(req) + "\n")
                self.proc.stdin.flush()
                line = self._readline(DCP_CHECK_TIMEOUT_S)
            except (BrokenPipeError, ValueError):
                line = ""
            if line is None:
                self.close()
                raise subprocess.TimeoutExpired(cmd, DCP_CHECK_TIMEOUT_S)
            if line:
                self.checks += 1
                r = json.loads(line)
                return subprocess.CompletedProcess(cmd, r["rc"], "", r["stderr"])
            self.close()  # the server died (not the check: that is the child's exit status)
            self.restarts += 1
        raise RuntimeError(f"dcp_job.py serve died twice on {a.ns}/{a.step} (its log: {self.log})")


def dir_shas(d: Path, names):
    out = {}
    for n in names:
        p = d / n
        out[n] = sha_file(p) if p.is_file() else None
    return out


class Oracle:
    def __init__(self, cluster, scratch: Path, s3=None):
        self.c = cluster
        self.s3 = s3  # an S3Tier when the durable tier is S3
        self.scratch = scratch
        scratch.mkdir(parents=True, exist_ok=True)
        self.attempts = {}  # (ns, step) -> [Attempt]
        self.acked = {}  # (ns, step) -> Acked
        self.newest = {}  # ns -> newest acknowledged step
        self.counters = dict(restores=0, restores_ok=0, bytes_verified=0, excused_losses=0,
                             restore_failed_durable_intact=0, unacked_visible_checked=0,
                             checks=0)
        self.dcp = DcpChecker(scratch.parent / "dcp-checker.log")
        self.findings = []
        self.excused_keys = set()
        self.finding_keys = set()
        # Where the checks' time goes (--profile): phase -> [calls, seconds].
        self.timing = defaultdict(lambda: [0, 0.0])

    def tally(self, phase, seconds):
        t = self.timing[phase]
        t[0] += 1
        t[1] += seconds

    @contextmanager
    def timed(self, phase):
        t0 = time.time()
        try:
            yield
        finally:
            self.tally(phase, time.time() - t0)

    def close(self):
        """Ends the DCP checker; its restarts, if any, are counted."""
        self.dcp.close()
        if self.dcp.restarts:
            self.counters["dcp_checker_restarts"] = self.dcp.restarts

    # --- recording -------------------------------------------------------------------------
    def attempt(self, a: Attempt):
        self.attempts.setdefault((a.ns, a.step), []).append(a)

    def ack(self, a: Attempt):
        key = (a.ns, a.step)
        if key in self.acked:
            raise Violation("double_ack", f"{a.ns}/{a.step} acknowledged to two writers "
                            f"(seeds {self.acked[key].attempt.seed} and {a.seed})", [a.node])
        self.acked[key] = Acked(a, time.time())
        self.newest[a.ns] = max(self.newest.get(a.ns, -1), a.step)

    def destroy(self, key, copy):
        if key in self.acked:
            self.acked[key].destroyed.add(copy)

    def acked_of(self, ns):
        return sorted(s for (n, s) in self.acked if n == ns)

    # --- checks ----------------------------------------------------------------------------
    def excused(self, key):
        r = self.acked[key]
        if "durable" not in r.destroyed:
            return False
        newest = self.newest.get(key[0]) == key[1]
        return not newest or {"mem_origin", "mem_holder"} <= r.destroyed

    def excuse(self, key) -> bool:
        """Whether the schedule excuses a failed restore of key (counted once per step)."""
        if not self.excused(key):
            return False
        self.excused_keys.add(key)
        self.counters["excused_losses"] = len(self.excused_keys)
        return True

    def durable_intact(self, key, finding: str) -> None:
        """A restore of key failed while its durable copy is intact: counted, and kept as a finding."""
        self.counters["restore_failed_durable_intact"] += 1
        if key not in self.finding_keys and len(self.findings) < 20:
            self.finding_keys.add(key)
            self.findings.append(finding)

    def durable_shas(self, ns, step, shas):
        """The durable copy's objects, read directly as stock DCP would (no agent)."""
        if self.s3:
            out = {}
            for n in shas:
                data = self.s3.get(ns, step, n)
                out[n] = hashlib.sha256(data).hexdigest() if data is not None else None
            return out
        ddir = self.c.durable / ns / f"step_{step:010d}"
        return dir_shas(ddir, shas) if ddir.is_dir() else None

    def check_dcp(self, key, a: Attempt):
        with self.timed("check_dcp"):
            return self._check_dcp(key, a)

    def _check_dcp(self, key, a: Attempt):
        """Load a DCP job's step through its origin's agent (dcp_job.py check) and compare every value."""
        ns, step = key
        agent = self.c.agents[a.node]
        self.counters["restores"] += 1
        r = self.dcp.check(a, "--socket", agent.socket)
        if r.returncode == 0:
            self.counters["restores_ok"] += 1
            self.counters["bytes_verified"] += a.dcp_world * DCP_BYTES_PER_RANK
            if key not in self.acked:
                self.counters["unacked_visible_checked"] += 1
            return True
        why = " | ".join(r.stderr.strip().splitlines())[:400] or f"(exit {r.returncode}, no message)"
        if r.returncode == 3:
            raise Violation("wrong_bytes", f"DCP load of {ns}/{step} on {a.node} returned values its writer did "
                            f"not save: {why}", [a.node])
        if key not in self.acked:
            return False
        if self.excuse(key):
            return False
        if not self.s3:
            ddir = self.c.durable / ns / f"step_{step:010d}"
            if ddir.is_dir() and self.dcp.check(a, "--durable-dir", ddir).returncode == 0:
                self.durable_intact(key, f"DCP load of {ns}/{step} on {a.node} failed ({why[:240]}) while its "
                                         f"durable copy loads with stock DCP")
                return True
        raise Violation("acked_step_lost", f"{ns}/{step} (a DCP step, acknowledged, copies destroyed by the "
                        f"schedule: {sorted(self.acked[key].destroyed) or 'none'}) loads on {a.node} with: {why}",
                        [a.node, self.c.holder(a.node)])

    def check_step(self, key):
        """Restore (ns, step) through its origin's agent and compare every byte's hash."""
        ns, step = key
        cands = self.attempts.get(key, [])
        dcp = [a for a in cands if a.dcp_world]
        if dcp:
            return self.check_dcp(key, dcp[0])
        with self.timed("check_restore"):
            return self._check_restore(key, cands)

    def _check_restore(self, key, cands):
        ns, step = key
        node = cands[0].node if cands else self.c.nodes()[0]
        agent = self.c.agents[node]
        out = self.scratch / uuid.uuid4().hex[:12]
        self.counters["restores"] += 1
        try:
            r = agent.cli("restore", ns, step, "--to", out, "--json", check=False, timeout=120)
            if r.returncode == 0:
                got_names = sorted(p.name for p in out.iterdir() if p.name != "_tierckpt_manifest.json")
                expect = [self.acked[key].attempt] if key in self.acked else cands
                for a in expect:
                    shas = a.shas()
                    if sorted(shas) == got_names and dir_shas(out, shas) == shas:
                        self.counters["restores_ok"] += 1
                        self.counters["bytes_verified"] += a.objects * a.size
                        if key not in self.acked:
                            self.counters["unacked_visible_checked"] += 1
                        return True
                raise Violation("wrong_bytes", f"restore {ns}/{step} on {node} succeeded with bytes no "
                                f"acknowledged writer wrote (objects {got_names}; seeds tried "
                                f"{[a.seed for a in expect]})", [node])
            if key not in self.acked:
                return False  # an unacknowledged step may be gone; it returned no bytes
            why = " | ".join(r.stderr.strip().splitlines())[:400] or "(no message)"
            if self.excuse(key):
                return False
            # "Loadable from some tier": the durable directory, read as stock DCP would.
            a = self.acked[key].attempt
            shas = a.shas()
            if self.durable_shas(ns, step, shas) == shas:
                self.durable_intact(key, f"restore {ns}/{step} on {node} failed ({why[:240]}) while its durable "
                                         f"copy is intact; copies destroyed: {sorted(self.acked[key].destroyed)}")
                return True
            raise Violation("acked_step_lost", f"{ns}/{step} (acknowledged, copies destroyed by the schedule: "
                            f"{sorted(self.acked[key].destroyed) or 'none'}) restores on {node} with: {why}",
                            [node, self.c.holder(node)])
        finally:
            shutil.rmtree(out, ignore_errors=True)

    def check_cluster(self, keys, namespaces):
        """After a fault: agents alive, nothing partial, newest steps kept, `keys` loadable."""
        self.counters["checks"] += 1
        for a in self.c.agents.values():
            if a.down is None and not a.alive():
                raise Violation("agent_died", f"tierckptd {a.node} exited with {a.proc.returncode} "
                                "without a fault of the schedule", [a.node])
        listings = {}
        for node, a in self.c.agents.items():
            owned = [ns for ns in namespaces if ns.startswith(node + "-")]
            # Per namespace: only then does ls ask the replica holders (memory "peer").
            lst = {}
            with self.timed("check_ls"):
                for ns in owned:
                    lst.update(a.ls(ns))
            writing = [k for k, e in lst.items() if k[0] in owned and e.get("memory") == "writing"]
            if writing:
                time.sleep(1.0)
                lst = {}
                for ns in owned:
                    lst.update(a.ls(ns))
                writing = [k for k, e in lst.items() if k[0] in owned and e.get("memory") == "writing"]
                if writing:
                    raise Violation("partial_step_visible", f"{writing} still writing on {node} after every "
                                    "writer ended", [node])
            for ns in owned:
                n = self.newest.get(ns)
                if n is None:
                    continue
                e = lst.get((ns, n), {})
                if e.get("memory") in ("committed", "peer"):
                    continue
                d = self.acked[(ns, n)].destroyed
                later = [k for k, v in lst.items() if k[0] == ns and k[1] > n and v.get("memory") == "committed"]
                if {"mem_origin", "mem_holder"} <= d or len(later) >= self.c.keep_last:
                    continue
                raise Violation("newest_step_evicted", f"{ns}/{n}, the newest acknowledged step, is in no "
                                f"memory of {node} (ls: {e or 'absent'})", [node])
            # Steps visible but never acknowledged: whole and right, or not readable at all.
            for k, e in lst.items():
                if k[0] in owned and k not in self.acked and k in keys:
                    self.check_step(k)
            listings[node] = lst
        for k in keys:
            if k in self.acked:
                self.check_step(k)
        with self.timed("check_tmpfs"):
            self.check_tmpfs()
        return listings

    def check_tmpfs(self):
        for a in self.c.agents.values():
            used = sum(p.stat().st_size for p in a.root.rglob("*") if p.is_file() and not p.is_symlink())
            if used > 2 * self.c.budget_bytes + (8 << 20):
                raise Violation("tmpfs_leak", f"{a.root} holds {used} bytes, over 2 x budget", [a.node])
