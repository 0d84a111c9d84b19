"""Issue 42 item 3, the takeover part: kills and stops aimed at the merge of a durable step that
spans nodes (decision 87). One step spans N = 4 real agents (each its own tmpfs root, socket and
peer port, one durable directory, --takeover-after 3, --persist-rate 4MiB so that each part's
upload lasts about 1.25 s); the merger is member `step % N` of the sorted members, its k-th
follower merges after k takeover periods without a manifest. Every kill or stop is aimed by
watching the durable directory or the agents' logs, never by a sleep alone:

  1. the merger SIGKILLed while it uploads its part: its first follower takes over
     (`merge_takeover` turn=1), the merger's holder uploads its part, the step becomes durable once
     and restores byte-identical from the durable tier alone;
  2. the merger, then its first follower the moment it logs its takeover, both SIGKILLed: the
     second follower finishes the step;
  3. the merger SIGSTOPped while it uploads, until the step was committed without it, then
     SIGCONTed: the step is committed exactly once, nothing in the durable step is rewritten or
     lost, and the merger finds its step durable.

The replicas are placed at ring distance 2 (--replica-spacing 2): the merger's holder is its second
follower, so killing the merger and its first follower leaves the merger's part on a live node.
"""
import json
import random
import re
import shutil
import signal
import subprocess
import time
import uuid
from pathlib import Path

from conftest import AGENT_BIN, CLI_BIN, WRITER_BIN, assert_dirs_equal
from agent_harness import SHM, AgentProcess, write_hostfile

_TEMPORARY = re.compile(r"\.tmp\.\d+\.\d+$")  # FsBlobStore's "<name>.tmp.<pid>.<n>"

N = 4
NS = "takeover"
TAKEOVER_S = 3
OBJECTS, SIZE = 6, 1 << 20  # 6 MiB per part: ~1.25 s at 4 MiB/s after the 1 MiB burst
MANIFEST = "_tierckpt_manifest.json"


def part_record(node):
    return f"_tierckpt_part.{node}.json"


def wait_for(what, cond, timeout=60.0, poll=0.01, why=lambda: ""):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = cond()
        if got:
            return got
        time.sleep(poll)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}\n{why()}")


class Span:
    """N agents n1..nN on this machine, one durable directory, a step written across all of them."""

    def __init__(self, work: Path, *extra):
        self.work = work
        self.durable = work / "durable"
        self.durable.mkdir()
        secret = work / "secret"
        secret.write_bytes(b"takeover-test-cluster-secret-0123456789\n")
        secret.chmod(0o600)
        hosts = work / "hosts"
        write_hostfile(hosts, N)
        self.nodes = [f"n{i + 1}" for i in range(N)]
        self.agents: dict[str, AgentProcess] = {}
        # Agents SIGKILLed mid-upload: the object put in flight may stay behind as
        # "<name>.tmp.<pid>.<n>", invisible to every reader and swept later (the file store's
        # contract: FsStoreTest.CrashLeftoversAreInvisibleAndSwept).
        self.killed_pids: set[int] = set()
        self.roots: dict[str, Path] = {}
        for node in self.nodes:
            root = SHM / f"tierckpt-takeover-{uuid.uuid4().hex[:10]}"
            self.roots[node] = root
            a = AgentProcess(work / f"{node}.sock", cli=CLI_BIN, output=work / f"{node}.log")
            a.error = AssertionError
            a.name = f"tierckptd {node}"
            a.launch([AGENT_BIN, "--socket", a.socket, "--root", root, "--durable", self.durable,
                      "--memory-budget", "256MiB", "--node-id", node, "--peers", hosts, "--peer-secret-file",
                      secret, "--replicas", "2", "--replica-spacing", "2", "--takeover-after", TAKEOVER_S,
                      "--persist-rate", "4MiB", "--log-level", "info", *extra], wait=False)
            self.agents[node] = a
        for a in self.agents.values():
            a.wait_ready()
        self.ref = work / "ref"

    def close(self):
        for a in self.agents.values():
            if a.alive():
                a.signal(signal.SIGCONT)
                a.kill()
        for r in self.roots.values():
            shutil.rmtree(r, ignore_errors=True)

    # ---- the step ----

    def step_dir(self, step):
        return self.durable / NS / f"step_{step:010d}"

    def order(self, step):
        """The sorted members from the merger on: [merger, first follower, second, ...] (decision 87)."""
        members = sorted(self.nodes)
        m = step % len(members)
        return members[m:] + members[:m]

    def names_merger(self, line, merger):
        """Whether a merge_takeover log line names merger: by its place among the sorted members (a
        follower's part names the members by count and digest only, decision 116)."""
        return f"merger_index={sorted(self.nodes).index(merger)}" in line

    def commit(self, step):
        """Every node writes its part; n1 commits the step across all N with --persist. The members
        are given shuffled: the agents sort them."""
        holders = []
        try:
            for i, node in enumerate(self.nodes[1:], start=2):
                holders.append(subprocess.Popen(
                    [WRITER_BIN, "--socket", self.agents[node].socket, "--ns", NS, "--step", str(step), "--objects",
                     str(OBJECTS), "--size", str(SIZE), "--prefix", f"{node}_", "--seed", str(i), "--ref-dir",
                     self.ref, "--no-commit", "--hold"],
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
            for p in holders:
                line = p.stdout.readline()
                assert line.startswith("SEALED"), f"a part's writer did not seal: {line!r} {p.stderr.read()}"
            shuffled = random.Random(step).sample(self.nodes, len(self.nodes))
            r = subprocess.run([WRITER_BIN, "--socket", self.agents["n1"].socket, "--ns", NS, "--step", str(step),
                                "--objects", str(OBJECTS), "--size", str(SIZE), "--prefix", "n1_", "--seed", "1",
                                "--ref-dir", self.ref, "--members", ",".join(shuffled), "--persist"],
                               capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
            assert r.returncode == 0, f"the spanning commit failed: {r.stderr}\n{self.log_tails()}"
        finally:
            for p in holders:
                p.stdin.close()
                p.wait(timeout=30)

    # ---- observing ----

    def log(self, node) -> str:
        return self.agents[node].log_text()

    def log_tails(self) -> str:
        return "\n".join(f"--- {node}:\n{self.log(node)[-2500:]}" for node in self.nodes)

    def events(self, node, event, step):
        """The log lines of `event` about this step in node's log."""
        return [ln for ln in self.log(node).splitlines()
                if f"event={event} " in ln and f"ns={NS} " in ln and f"step={step}" in ln.split()]

    def wait_event(self, node, event, step, timeout=60.0):
        return wait_for(f"{node} to log {event} for step {step}", lambda: self.events(node, event, step),
                        timeout=timeout, why=self.log_tails)

    def holder_of(self, origin, step):
        """The node whose replica tier holds origin's part of step (seen on disk)."""
        held = [n for n in self.nodes if n != origin and
                (self.roots[n] / "replicas" / origin / "ns" / NS / f"step_{step:010d}").is_dir()]
        assert len(held) == 1, f"{origin}'s part of step {step} is held by {held}"
        return held[0]

    def aim_at_upload(self, node, step, sig):
        """Sends sig to node while it uploads its part: once one of its objects is in the durable
        step, before its part record is. Fails when the signal landed after the upload."""
        d = self.step_dir(step)
        wait_for(f"{node} to start uploading its part", lambda: any(d.glob(f"{node}_*.bin")), timeout=30,
                 poll=0.005, why=self.log_tails)
        self.agents[node].signal(sig)
        if sig == signal.SIGKILL:
            self.killed_pids.add(self.agents[node].proc.pid)
            self.agents[node].proc.wait(timeout=10)
        assert not (d / part_record(node)).exists(), f"{node} had uploaded its part before {sig.name}: not a test"
        assert not (d / MANIFEST).exists()

    def manifest(self, step):
        return json.loads((self.step_dir(step) / MANIFEST).read_text())

    def wait_manifest(self, step, timeout=60.0):
        p = self.step_dir(step) / MANIFEST
        wait_for(f"the durable manifest of step {step}", p.exists, timeout=timeout, why=self.log_tails)
        return self.manifest(step)

    def restore_from_durable_alone(self, step):
        """Restores the step with a fresh agent that has an empty root and no peers; compares it
        byte for byte with what the writers wrote."""
        root = SHM / f"tierckpt-takeover-{uuid.uuid4().hex[:10]}"
        solo = AgentProcess(self.work / "solo.sock", cli=CLI_BIN, output=self.work / "solo.log")
        solo.error = AssertionError
        solo.launch([AGENT_BIN, "--socket", solo.socket, "--root", root, "--durable", self.durable,
                     "--memory-budget", "256MiB"])
        try:
            out = self.work / f"restored{step}"
            r = subprocess.run([CLI_BIN, "--socket", solo.socket, "restore", NS, str(step), "--to", out],
                               capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
            assert r.returncode == 0, f"{r.stderr}\n{solo.log_text()[-3000:]}"
            assert_dirs_equal(self.ref, out)
        finally:
            solo.kill()
            shutil.rmtree(root, ignore_errors=True)

    def durable_state(self, node, step):
        r = subprocess.run([CLI_BIN, "--socket", self.agents[node].socket, "ls", NS, "--json"], capture_output=True,
                           text=True, timeout=30, stdin=subprocess.DEVNULL)
        assert r.returncode == 0, r.stderr
        return {s["step"]: s for s in json.loads(r.stdout)["steps"]}[step]["durable"]

    def assert_whole(self, step):
        """The durable step holds exactly the objects the writers wrote, one part record per
        member that lists its own objects (and the members by count and digest only), the manifest listing them all, and nothing else."""
        d = self.step_dir(step)
        m = self.manifest(step)
        listed = {o["name"]: o for o in m["objects"]}
        written = {f.name: f.stat().st_size for f in self.ref.iterdir()}
        assert {n: o["size"] for n, o in listed.items()} == written
        assert m["members"] == sorted(self.nodes)
        for node in self.nodes:
            # Decision 113: a record names the members by count and digest, its part has no list,
            # whoever uploaded it (the member or, on a takeover, its replica's holder).
            wrapper = json.loads((d / part_record(node)).read_text())
            assert wrapper["format"] == "tierckpt.part_record" and wrapper["version"] == 1, wrapper
            assert wrapper["members"]["count"] == len(self.nodes), wrapper
            assert wrapper["members"]["digest"].startswith("xxh3-64:"), wrapper
            rec = wrapper["part"]
            assert "members" not in rec, rec
            assert rec["node"] == node and rec["step"] == step, rec
            for o in rec["objects"]:
                assert o["name"].startswith(f"{node}_"), (node, o)
                assert listed[o["name"]]["checksum"] == o["checksum"], (node, o)
            assert len(rec["objects"]) == OBJECTS, rec
        files = sorted(p.name for p in d.iterdir())
        # A killed agent's put in flight, and nothing else, may have left its temporary file.
        def killed_put(name):
            m = re.fullmatch(r"(.+)\.tmp\.(\d+)\.\d+", name)
            return m is not None and m.group(1) in written and int(m.group(2)) in self.killed_pids
        files = [f for f in files if not killed_put(f)]
        assert files == sorted([*written, MANIFEST, *(part_record(n) for n in self.nodes)]), files

    def merged_by(self, step, merger):
        """The nodes that logged merging the step, once merger did: the manifest is in the durable
        directory a moment before its merger logs `persist_merged`, so the log is waited for."""
        self.wait_event(merger, "persist_merged", step, timeout=30)
        return [n for n in self.nodes if self.events(n, "persist_merged", step)]


def test_a_merger_killed_while_it_uploads_is_taken_over_by_its_first_follower(tmp_path):
    step = 5
    c = Span(tmp_path)
    try:
        merger, first, second, _ = c.order(step)
        c.commit(step)
        holder = c.holder_of(merger, step)
        assert holder == second, f"--replica-spacing 2 puts {merger}'s replica on {second}, not {holder}"
        c.aim_at_upload(merger, step, signal.SIGKILL)
        take = c.wait_event(first, "merge_takeover", step)
        assert c.names_merger(take[0], merger) and "turn=1" in take[0], take
        m = c.wait_manifest(step)
        assert m["node"] == first, f"the manifest was merged by {m['node']}, not {merger}'s first follower {first}"
        # The merger's part came from its holder's replica tier, asked by the first follower.
        assert any(f"origin={merger}" in ln and f"by={holder}" in ln for ln in c.events(first, "part_takeover", step)), \
            c.log_tails()
        for n in c.order(step)[1:]:  # every survivor's persist ends, and ends well
            done = c.wait_event(n, "persist", step, timeout=30)
            assert "level=info" in done[0], done
            assert c.durable_state(n, step) == "committed"
        assert c.merged_by(step, first) == [first]
        c.assert_whole(step)
        c.restore_from_durable_alone(step)
    finally:
        c.close()


def test_a_merger_and_its_first_follower_killed_as_it_takes_over_leave_the_step_to_the_second(tmp_path):
    step = 6
    c = Span(tmp_path)
    try:
        merger, first, second, third = c.order(step)
        c.commit(step)
        assert c.holder_of(merger, step) == second
        c.aim_at_upload(merger, step, signal.SIGKILL)
        c.wait_event(first, "merge_takeover", step, timeout=30)
        c.agents[first].kill(signal.SIGKILL)  # the moment it took over
        d = c.step_dir(step)
        assert (d / part_record(first)).exists(), "a follower takes over only after uploading its own part"
        assert not (d / MANIFEST).exists(), f"{first} merged before it was killed: not a test"
        take = c.wait_event(second, "merge_takeover", step)
        assert c.names_merger(take[0], merger) and "turn=2" in take[0], take
        m = c.wait_manifest(step)
        assert m["node"] == second, f"the manifest was merged by {m['node']}, not the second follower {second}"
        assert c.merged_by(step, second) == [second]
        assert not c.events(third, "merge_takeover", step), "the third follower merged too: the second was late"
        c.assert_whole(step)
        c.restore_from_durable_alone(step)
    finally:
        c.close()


def test_a_merger_stopped_past_its_takeover_and_continued_commits_the_step_once(tmp_path):
    step = 7
    # A stopped merger answers no handshake: 1 s until the first follower asks the holder instead.
    c = Span(tmp_path, "--peer-timeout-ms", "1000")
    try:
        merger, first, _, _ = c.order(step)
        c.commit(step)
        c.aim_at_upload(merger, step, signal.SIGSTOP)
        take = c.wait_event(first, "merge_takeover", step)
        assert c.names_merger(take[0], merger) and "turn=1" in take[0], take
        m = c.wait_manifest(step)
        d = c.step_dir(step)
        # The stopped merger's temporary ("<object>.tmp.<pid>.<n>") is there when the stop landed inside
        # an object write (seen in CI): a write in flight, not a file of the committed step.
        before = {p.name: (p.read_bytes(), p.stat().st_ino, p.stat().st_mtime_ns) for p in d.iterdir()
                  if not _TEMPORARY.search(p.name)}
        assert c.agents[merger].alive()
        assert not c.events(merger, "persist", step), "the stopped merger logged its persist"
        c.agents[merger].signal(signal.SIGCONT)
        done = c.wait_event(merger, "persist", step, timeout=60)  # its persist ends, one way or the other
        # The store refuses the rest of its upload into the committed step; the step is durable with
        # its part all the same, and the merger must say so (it failed its persist before the fix).
        assert "level=info" in done[0], done
        r = subprocess.run([CLI_BIN, "--socket", c.agents[merger].socket, "persist", NS, str(step), "--wait",
                            "--timeout", "30"], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        assert r.returncode == 0, f"{merger}: {r.stderr}"
        assert c.durable_state(merger, step) == "committed"
        after = {p.name: (p.read_bytes(), p.stat().st_ino, p.stat().st_mtime_ns) for p in d.iterdir()}
        assert after[MANIFEST] == before[MANIFEST], "the committed manifest was rewritten"
        assert set(after) == set(before), f"the durable step changed: {set(before) ^ set(after)}"
        # A write the stop interrupted may end in a rename over its committed object (decision 99 leaves
        # that open): the same bytes under a new inode. The bytes are what must not change.
        for name, (data, _, _) in after.items():
            assert data == before[name][0], f"{name} changed content after the merger continued"
        assert c.merged_by(step, m["node"]) == [m["node"]]
        c.assert_whole(step)
        c.restore_from_durable_alone(step)
    finally:
        c.close()
