"""The erasure-coded memory tier between real agents (issue 23, decision 135).

Six real tierckptd processes on loopback, one hostfile and one cluster secret,
started with --redundancy rs:4+2 (beside the default --replicas 2, or alone
with --replicas 1: decision 142). Each agent reports its group,
its group's parity holders and each step's redundancy in
`tierckpt agent status --json` ("peers.parity"); a holder keeps a sealed
group's pieces and record under <root>/parity/<ns>/step_<n>/group_<g>/.
Failures are real SIGKILLs.
"""
import json
import shutil
import signal
import subprocess
import time

import pytest

from agent_harness import flip_byte, write_hostfile  # tests/harness, on the path from conftest.py
from conftest import WRITER_BIN, assert_dirs_equal
from peer_cluster import PeerCluster
from peer_cluster import wait_for as shared_wait_for

MiB = 1 << 20
STEP = 3


def wait_for(pred, timeout=30.0, what="condition"):
    shared_wait_for(pred, timeout=timeout, what=what, poll=0.05)


class Cluster(PeerCluster):
    def __init__(self, agents, tmp_path, n, extra, durable=None):
        super().__init__(agents, tmp_path, n, extra, together=True, durable=durable)

    def parity(self, node):
        return json.loads(self.nodes[node].cli("agent", "status", "--json").stdout)["peers"]["parity"]

    def groups(self):
        """{group: (data members, parity holders)} from every agent's own report."""
        out = {}
        for node in self.nodes:
            p = self.parity(node)
            data, holders = out.setdefault(p["group"], ([], p["holders"]))
            assert holders == p["holders"], f"{node} names other holders of group {p['group']}"
            data.append(node)
        return out

    def step_state(self, node, ns, step):
        for s in self.parity(node)["steps"]:
            if s["ns"] == ns and s["step"] == step:
                return s
        return None

    def group_dir(self, holder, ns, step, group):
        return self.nodes[holder].root / "parity" / ns / f"step_{step:010d}" / f"group_{group}"

    def replica_holders(self, node):
        return json.loads(self.nodes[node].cli("agent", "status", "--json").stdout)["peers"]["holders"]

    def lost_together(self, data):
        """Two data members of a group that hold each other's only replica (with --replica-spacing 3 over
        six agents a node's replica holder is the node three places on): killing both leaves no replica
        of either, so only their group's parity can restore them."""
        pairs = [(a, b) for a in data for b in data
                 if a < b and self.replica_holders(a) == [b] and self.replica_holders(b) == [a]]
        assert pairs, f"no two members of {data} hold each other's replica: " + \
            str({n: self.replica_holders(n) for n in data})
        return pairs[0]

    def replace(self, node):
        """A fresh agent with an empty tmpfs root (a new machine) under the node's id; its durable directory
        stays (the shared durable tier)."""
        a = self.nodes[node]
        assert not a.alive()
        shutil.rmtree(a.root, ignore_errors=True)
        a.start()
        return a


@pytest.fixture
def cluster(agents, tmp_path):
    def make(n=6, *extra, durable=None):
        return Cluster(agents, tmp_path, n, ("--redundancy", "rs:4+2", *extra), durable=durable)
    return make


def write_part(agent, ns, step, i):
    # Parts of different lengths: a group's parity pieces are as long as its longest part.
    agent.writer("--ns", ns, "--step", step, "--objects", 2, "--size", MiB + 4096 * i, "--seed", 100 + i)


def test_after_a_commit_every_holder_seals_its_groups_pieces_and_every_member_reports_the_step_redundant(
        cluster):
    c = cluster()
    groups = c.groups()
    assert sorted(groups) == [0, 1], groups  # 6 nodes, K = 4: a full group and a short one
    for g, (data, holders) in groups.items():
        assert len(holders) == 2 and not set(holders) & set(data), (g, data, holders)
    for i, node in enumerate(sorted(c.nodes)):
        write_part(c[node], "j", STEP, i)
    for node in c.nodes:
        wait_for(lambda: (c.step_state(node, "j", STEP) or {}).get("state") == "redundant",
                 what=f"{node} to report j/{STEP} redundant: {c.step_state(node, 'j', STEP)}")
        assert c.step_state(node, "j", STEP)["redundant"] is True
    # The human status says what the scheme does not do (decision 135).
    text = c["n1"].cli("agent", "status").stdout
    assert "parity         rs:4+2 (experimental: rebuilds lost parts of redundant steps)" \
        in text, text
    assert f"parity step    j/{STEP}: redundant" in text, text
    assert c.parity("n1")["recovery"] is True  # decision 139
    # `ls` shows each step's parity state beside its tiers, from the List reply (decision 166).
    listed = c["n1"].cli("ls", "j").stdout
    header, row = listed.splitlines()[:2]
    assert header.split()[-1] == "PARITY" and row.split()[-1] == "redundant", listed
    assert c["n1"].cli_json("ls", "j")["steps"][0]["parity"] == "redundant"
    for g, (data, holders) in groups.items():
        for j, holder in enumerate(holders):
            d = c.group_dir(holder, "j", STEP, g)
            record = json.loads((d / "record.json").read_text())
            assert record["format"] == "tierckpt.parity", record
            assert [m["member"] for m in record["data"]] == data, record
            longest = max(m["piece_length"] for m in record["data"])
            assert [p["index"] for p in record["parity"]] == [j], record
            assert (d / f"parity_{j}").stat().st_size == longest
    # A delete on a member reaches its group's parity holders (DropParity), not another group's.
    g0_data, g0_holders = groups[0]
    c[g0_data[0]].cli("rm", "j", STEP)
    for holder in g0_holders:
        wait_for(lambda: not c.group_dir(holder, "j", STEP, 0).exists(), what=f"{holder} to drop group 0")
    assert c.step_state(g0_data[0], "j", STEP) is None
    for holder in groups[1][1]:
        assert (c.group_dir(holder, "j", STEP, 1) / "record.json").exists()


def test_a_holder_killed_while_its_group_folds_leaves_no_member_claiming_redundancy_after_its_restart(cluster):
    c = cluster(6, "--peer-timeout-ms", "3000")
    data, holders = c.groups()[0]
    victim, survivor = holders
    # Three of four members commit: each holder folds their parts in memory and waits for the fourth.
    for i, node in enumerate(data[:3]):
        write_part(c[node], "j", STEP, i)
    for node in data[:3]:
        assert c.step_state(node, "j", STEP)["state"] in ("pending", "incomplete")
    c[victim].kill(signal.SIGKILL)
    assert not c.group_dir(victim, "j", STEP, 0).exists(), "a holder published a group it never saw whole"
    c[victim].start()
    write_part(c[data[3]], "j", STEP, 3)
    for node in data:
        wait_for(lambda: c.step_state(node, "j", STEP)["state"] == "incomplete",
                 what=f"{node}'s send to end: {c.step_state(node, 'j', STEP)}")
        s = c.step_state(node, "j", STEP)
        assert s["redundant"] is False and victim in s["detail"], s
    # The restarted holder saw only the fourth part: nothing of the group is published there.
    assert not (c.group_dir(victim, "j", STEP, 0) / "record.json").exists()
    assert not list((c[victim].root / "parity").rglob("parity_*"))
    # The other holder saw every part and sealed; that alone makes no one redundant.
    assert (c.group_dir(survivor, "j", STEP, 0) / "record.json").exists()


def test_fewer_agents_than_k_plus_m_is_refused_at_start_naming_both_counts(agents, tmp_path):
    secret = tmp_path / "secret"
    secret.write_bytes(b"0123456789abcdef-cluster-secret\n")
    secret.chmod(0o600)
    hosts = tmp_path / "hosts"
    write_hostfile(hosts, 4)
    a = agents("--memory-budget", "64MiB", "--node-id", "n1", "--peers", hosts, "--peer-secret-file", secret,
               "--redundancy", "rs:4+2", start=False)
    a.start(wait=False)
    assert a.proc.wait(timeout=30) == 2
    log = a.log_text()
    assert "--redundancy rs:4+2 over the 4 agents" in log, log
    assert "at least K+M agents" in log, log


def test_retention_on_the_members_drops_the_parity_of_the_steps_they_no_longer_keep(cluster):
    c = cluster(6, "--keep-last", "1")
    groups = c.groups()
    for step in (STEP, STEP + 1):
        for i, node in enumerate(sorted(c.nodes)):
            write_part(c[node], "j", step, i)
        for node in c.nodes:
            wait_for(lambda: (c.step_state(node, "j", step) or {}).get("state") == "redundant",
                     what=f"{node} to report j/{step} redundant: {c.step_state(node, 'j', step)}")
    # --keep-last 1: each member evicted step 3 when step 4 committed, and its next send dropped step 3's parity.
    for g, (data, holders) in groups.items():
        for holder in holders:
            wait_for(lambda: not c.group_dir(holder, "j", STEP, g).exists(),
                     what=f"{holder} to drop group {g} of step {STEP}")
            assert (c.group_dir(holder, "j", STEP + 1, g) / "record.json").exists()
    for node in c.nodes:
        wait_for(lambda: c.step_state(node, "j", STEP) is None, what=f"{node} to forget step {STEP}")


def test_a_step_spanning_every_node_is_redundant_on_every_member_though_its_coordinator_commits_last(cluster):
    # Decision 136: the parity is sent after each part's commit, off the commit's path, so a member whose
    # group waits for the coordinator's part (committed last, after the tree answered) does not hold it up.
    c = cluster(6, "--commit-fan-out", "2")
    nodes = sorted(c.nodes)
    held = []
    for i, node in enumerate(nodes[1:], start=2):
        args = ["--ns", "s", "--step", STEP, "--objects", 2, "--size", 65536 + 512 * i, "--prefix", f"{node}_",
                "--seed", i, "--no-commit", "--hold"]
        p = subprocess.Popen([str(WRITER_BIN), "--socket", str(c[node].socket), *map(str, args)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        held.append(p)
    try:
        for p in held:
            line = p.stdout.readline()
            assert line.startswith("SEALED"), f"a part's writer did not seal: {line!r} {p.stderr.read()}"
        c["n1"].writer("--ns", "s", "--step", STEP, "--objects", 2, "--size", 65536, "--prefix", "n1_",
                       "--seed", 1, "--members", ",".join(nodes), timeout=60)
    finally:
        for p in held:
            if p.poll() is None:
                p.stdin.close()
                p.wait(timeout=30)
    for node in nodes:
        wait_for(lambda: (c.step_state(node, "s", STEP) or {}).get("state") == "redundant",
                 what=f"{node} to report s/{STEP} redundant: {c.step_state(node, 's', STEP)}")
    for g, (data, holders) in c.groups().items():
        for holder in holders:
            assert (c.group_dir(holder, "s", STEP, g) / "record.json").exists()


def test_a_member_stopped_while_its_group_waits_for_the_others_stops_at_once(cluster):
    # Regression: the send waited for the group for the whole --peer-timeout-ms (30 s) in one request,
    # and a graceful stop waited for it; now the wait is asked in slices and the stop ends it.
    c = cluster()
    data, _ = c.groups()[0]
    write_part(c[data[0]], "j", STEP, 0)
    assert c.step_state(data[0], "j", STEP)["state"] == "pending"
    started = time.time()
    c[data[0]].proc.send_signal(signal.SIGTERM)
    assert c[data[0]].proc.wait(timeout=60) == 0
    assert time.time() - started < 10, f"the stop took {time.time() - started:.1f} s"


def test_a_corrupt_parity_piece_is_detected_at_its_holders_restart_and_the_member_stops_claiming_redundancy(
        cluster):
    c = cluster(6, "--peer-timeout-ms", "3000")
    data, holders = c.groups()[0]
    for i, node in enumerate(data):
        write_part(c[node], "j", STEP, i)
    for node in data:
        wait_for(lambda: c.step_state(node, "j", STEP)["state"] == "redundant", what=f"{node} redundant")
    victim = holders[0]
    piece = c.group_dir(victim, "j", STEP, 0) / "parity_0"
    with open(piece, "r+b") as f:  # one flipped byte in the middle of the piece
        f.seek(piece.stat().st_size // 2)
        b = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([b[0] ^ 0xFF]))
    c[victim].kill(signal.SIGKILL)
    c[victim].start()
    # The restart's re-index checks every piece against its record and removes the group (decision 132).
    assert not c.group_dir(victim, "j", STEP, 0).exists()
    assert "parity" in c[victim].log_text() and "checksum" in c[victim].log_text().lower()
    # The member's next commit asks again about the steps it reported redundant: step 3 no longer is.
    write_part(c[data[0]], "j", STEP + 1, 0)
    wait_for(lambda: c.step_state(data[0], "j", STEP)["state"] == "incomplete",
             what=f"{data[0]} to notice: {c.step_state(data[0], 'j', STEP)}")
    assert victim in c.step_state(data[0], "j", STEP)["detail"]
    assert "event=parity_lost" in c[data[0]].log_text()


def test_a_restarted_member_reports_its_steps_unknown_until_its_next_commit_asks_the_holders_again(cluster):
    c = cluster(6, "--peer-timeout-ms", "3000")  # step 4's own group never completes: its send waits 3 s
    data, _ = c.groups()[0]
    for i, node in enumerate(data):
        write_part(c[node], "j", STEP, i)
    for node in data:
        wait_for(lambda: c.step_state(node, "j", STEP)["state"] == "redundant", what=f"{node} redundant")
    c[data[0]].kill(signal.SIGKILL)
    c[data[0]].start()
    s = c.step_state(data[0], "j", STEP)
    assert s["state"] == "unknown" and s["redundant"] is False, s  # never claimed without asking
    write_part(c[data[0]], "j", STEP + 1, 0)
    wait_for(lambda: c.step_state(data[0], "j", STEP)["state"] == "redundant",
             what=f"{data[0]} to learn step {STEP} is still redundant: {c.step_state(data[0], 'j', STEP)}")


def write_parts(c, ns, step, tmp_path, *extra):
    """Every node commits its part of (ns, step); returns each node's reference copy."""
    refs = {}
    for i, node in enumerate(sorted(c.nodes)):
        refs[node] = tmp_path / f"ref_{node}"
        c[node].writer("--ns", ns, "--step", step, "--objects", 3, "--size", MiB + 4096 * i, "--seed", 100 + i,
                       "--ref-dir", refs[node], *extra)
    return refs


def test_two_killed_members_of_a_four_plus_two_group_are_restored_byte_identical_from_the_survivors(
        cluster, tmp_path):
    # Decision 139. The two victims hold each other's only replica, and nothing was persisted: without the
    # rebuild from parity neither replacement finds its part in any tier.
    c = cluster(6, "--replica-spacing", "3")
    data, holders = c.groups()[0]
    a, b = c.lost_together(data)
    refs = write_parts(c, "j", STEP, tmp_path)
    for node in data:
        wait_for(lambda: (c.step_state(node, "j", STEP) or {}).get("state") == "redundant",
                 what=f"{node} to report j/{STEP} redundant: {c.step_state(node, 'j', STEP)}")
    c[a].kill(signal.SIGKILL)
    c[b].kill(signal.SIGKILL)
    for node in (a, b):
        c.replace(node)
        # Before any byte moves, `show` answers from the group's parity record (this node's objects).
        shown = c[node].cli_json("show", "j", STEP)
        assert shown["memory"] != "committed", shown
        assert sorted(o["name"] for o in shown["manifest"]["objects"]) == \
            sorted(str(p.relative_to(refs[node])) for p in refs[node].rglob("*") if p.is_file()), shown
        out = tmp_path / f"out_{node}"
        c[node].cli("restore", "j", STEP, "--to", out)
        assert_dirs_equal(refs[node], out)
        log = c[node].log_text()
        assert f"event=restored_from_parity ns=j step={STEP} group=0" in log, log[-3000:]
        assert "restored_from_peer" not in log
        assert c[node].steps("j")[STEP]["memory"] == "committed"  # back in the replacement's memory
    # The first replacement rebuilt from the two other members and both parity pieces, b being gone then.
    others = [n for n in data if n not in (a, b)]
    assert f"data={','.join(others)} parity={','.join(holders)}" in c[a].log_text()


def test_three_killed_members_of_a_four_plus_two_group_fall_back_to_the_durable_tier_saying_so(cluster, tmp_path):
    c = cluster(6, "--replica-spacing", "3")
    data, holders = c.groups()[0]
    a, b = c.lost_together(data)
    third = next(n for n in data if n not in (a, b))
    refs = write_parts(c, "d", STEP, tmp_path, "--persist", "--wait-durable")
    for node in data:
        wait_for(lambda: (c.step_state(node, "d", STEP) or {}).get("state") == "redundant",
                 what=f"{node} to report d/{STEP} redundant: {c.step_state(node, 'd', STEP)}")
    for node in (a, b, third):
        c[node].kill(signal.SIGKILL)
    c.replace(a)
    out = tmp_path / "out"
    c[a].cli("restore", "d", STEP, "--to", out)
    assert_dirs_equal(refs[a], out)
    log = c[a].log_text()
    assert f"event=parity_restore_failed ns=d step={STEP} next=durable" in log, log[-3000:]
    assert f"parity group 0 of d step {STEP}: 3 of its 6 pieces are gone (M = 2)" in log, log[-3000:]
    assert "restored_from_parity" not in log


def test_with_one_replica_two_killed_members_of_a_step_spanning_every_node_are_restored_byte_identical(
        cluster, tmp_path):
    # Decisions 141 and 142: no replicas (--replicas 1), nothing persisted, a step spanning all six agents.
    # Two data members of group 0, the step's coordinator one of them, are SIGKILLed and replaced: parity is
    # the only copy of their parts, and each replacement rebuilds its part and publishes it with the
    # manifest it was committed with (the coordinator's member list, the other's member_ref).
    c = cluster(6, "--replicas", "1")
    data, holders = c.groups()[0]
    coordinator, other = data[0], data[1]
    nodes = sorted(c.nodes)
    refs = commit_spanning_step(c, "s", coordinator, tmp_path)
    # Decision 146: --replicas 1 makes --parity-ack all the default; the parts committed down the tree did not
    # wait for their groups (their groups, holding the coordinator, would have waited for it until the
    # timeout). Decision 161: the coordinator's commit, its part last, returned once its own group and then
    # every other group holding a member's part was sealed on all its holders.
    assert c.parity(coordinator)["ack"] == "all"
    assert c.step_state(coordinator, "s", STEP)["state"] == "redundant", c.step_state(coordinator, "s", STEP)
    for g, (_, group_holders) in c.groups().items():
        for holder in group_holders:
            assert (c.group_dir(holder, "s", STEP, g) / "record.json").exists(), (g, holder)
    committed = {node: c[node].cli_json("show", "s", STEP)["manifest"] for node in (coordinator, other)}
    assert committed[coordinator]["members"] == nodes, committed[coordinator]
    assert committed[other]["member_ref"]["coordinator"] == coordinator, committed[other]
    for node in data:
        wait_for(lambda: (c.step_state(node, "s", STEP) or {}).get("state") == "redundant",
                 what=f"{node} to report s/{STEP} redundant: {c.step_state(node, 's', STEP)}")
    assert c.replica_holders(coordinator) == []  # no replica anywhere
    c[coordinator].kill(signal.SIGKILL)
    c[other].kill(signal.SIGKILL)
    for node in (coordinator, other):
        c.replace(node)
        # Before any byte moves, `show` answers from the group's parity record, membership included.
        shown = c[node].cli_json("show", "s", STEP)
        assert shown["memory"] != "committed", shown
        assert shown["manifest"] == committed[node], shown
        out = tmp_path / f"out_{node}"
        c[node].cli("restore", "s", STEP, "--to", out)
        assert_dirs_equal(refs[node], out)
        log = c[node].log_text()
        assert f"event=restored_from_parity ns=s step={STEP} group=0" in log, log[-3000:]
        assert "parity_restore_failed" not in log, log[-3000:]
        assert c[node].steps("s")[STEP]["memory"] == "committed"  # back in the replacement's memory
        assert c[node].cli_json("show", "s", STEP)["manifest"] == committed[node]
    # The first replacement rebuilt from the two other members and both parity pieces, the second gone then.
    assert f"data={','.join(data[2:])} parity={','.join(holders)}" in c[coordinator].log_text()


def test_with_parity_ack_all_a_commit_returns_with_its_step_already_redundant_on_every_member(cluster):
    # Decision 146: with --replicas 1 --parity-ack all every member's commit returns only once its group's
    # parity is sealed on every holder, so status reports the step redundant on every member as soon as the
    # commits return, without waiting for it.
    c = cluster(6, "--replicas", "1", "--parity-ack", "all", "--peer-timeout-ms", "6000")
    nodes = sorted(c.nodes)
    assert c.parity("n1")["ack"] == "all"
    writers = {}
    for i, node in enumerate(nodes):
        writers[node] = c[node].writer_popen("--ns", "a", "--step", STEP, "--objects", 2, "--size", MiB + 4096 * i,
                                             "--seed", 100 + i)
    for node, p in writers.items():
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0, f"{node}: {out}\n{err}\n{c[node].log_text()[-3000:]}"
    for node in nodes:
        state = c.step_state(node, "a", STEP)
        assert state is not None and state["state"] == "redundant", (node, state)
    text = c["n1"].cli("agent", "status").stdout
    assert f"parity step    a/{STEP}: redundant" in text, text
    assert "of other groups' parity; commit waits for all" in text, text
    for g, (data, holders) in c.groups().items():
        for holder in holders:
            assert (c.group_dir(holder, "a", STEP, g) / "record.json").exists()

    # A group that does not complete in time (one member alone commits step 4): the commit reports that the
    # step is not redundant, naming the holders' answers, as --replica-ack all reports a failed replica; the
    # step stays committed in the member's memory and status says incomplete.
    data, holders = c.groups()[0]
    started = time.time()
    r = c[data[0]].writer("--ns", "a", "--step", STEP + 1, "--objects", 1, "--size", 65536, check=False)
    took = time.time() - started
    said = r.stdout + r.stderr
    assert r.returncode != 0, said
    # The holders' answers after --peer-timeout-ms (6 s); on a machine too slow to get them within one more
    # second, the timeout answer naming the holders.
    assert (f"the parity of a step {STEP + 1} of node {data[0]} (group 0) is not complete" in said
            and "1 of 4 folded" in said) or f"was not sealed by its holders {', '.join(holders)}" in said, said
    assert "the step is committed in this node's memory" in said, said
    assert took < 30, took
    assert c[data[0]].steps("a")[STEP + 1]["memory"] == "committed"
    wait_for(lambda: c.step_state(data[0], "a", STEP + 1)["state"] == "incomplete",
             what=f"{data[0]} to report a/{STEP + 1} incomplete")
    assert f"event=parity_sent ns=a step={STEP + 1} group=0 redundant=false" in c[data[0]].log_text()



def test_with_one_replica_a_corrupt_memory_copy_is_repaired_from_its_groups_parity(cluster, tmp_path):
    # --replicas 1, nothing persisted: the group's parity is the only other copy of a member's part. A byte
    # flipped in the member's memory copy is caught by the reader's checksum; the agent's repair re-hashes
    # it, drops it and rebuilds the part from the group's survivors (never from the corrupt bytes), and the
    # read goes on byte-identical. Before, the repair looked only for replicas and a durable copy, found
    # none, and refused: the step could not be read although its parity could rebuild it.
    c = cluster(6, "--replicas", "1", "--parity-ack", "none")  # the parts written one after another
    data, holders = c.groups()[0]
    refs = write_parts(c, "r", STEP, tmp_path)
    for node in data:
        wait_for(lambda: (c.step_state(node, "r", STEP) or {}).get("state") == "redundant",
                 what=f"{node} to report r/{STEP} redundant: {c.step_state(node, 'r', STEP)}")
    victim = data[1]
    flip_byte(next(c[victim].root.rglob(f"r/step_{STEP:010d}/obj_1.bin")), 4321)
    assert c[victim].cli("verify", "r", STEP, check=False).returncode == 1
    out = tmp_path / "out"
    r = c[victim].cli("restore", "r", STEP, "--to", out, check=False)
    assert r.returncode == 0, r.stdout + r.stderr + c[victim].log_text()[-3000:]
    assert_dirs_equal(refs[victim], out)
    assert "obj_1.bin" in r.stderr and "parity group 0" in r.stderr, r.stderr
    log = c[victim].log_text()
    assert f"event=corrupt_copy_dropped ns=r step={STEP} object=obj_1.bin part=own" in log, log[-3000:]
    assert f"event=restored_from_parity ns=r step={STEP} group=0" in log, log[-3000:]
    others = [n for n in data if n != victim]
    assert f"data={','.join(others)} parity=" in log, log[-3000:]
    assert c[victim].cli("verify", "r", STEP).returncode == 0  # the memory copy replaced, not bypassed
    # The other members' copies were only read.
    for node in others:
        assert "corrupt_copy_dropped" not in c[node].log_text()


def commit_spanning_step(c, ns, coordinator, tmp_path, members=None, check=True):
    """Every member (default: every node) writes its part of (ns, STEP) ("<node>_obj_<i>.bin"), the coordinator
    committing the step across all of them; returns each member's reference copy (and, with check=False, the
    coordinator's writer's result)."""
    nodes = sorted(members or c.nodes)
    refs = {node: tmp_path / f"ref_{ns}_{node}" for node in nodes}
    held = []
    try:
        for i, node in enumerate(nodes):
            if node == coordinator:
                continue
            args = ["--ns", ns, "--step", STEP, "--objects", 2, "--size", MiB + 4096 * i, "--prefix", f"{node}_",
                    "--seed", 100 + i, "--ref-dir", refs[node], "--no-commit", "--hold"]
            held.append(subprocess.Popen([str(WRITER_BIN), "--socket", str(c[node].socket), *map(str, args)],
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                         text=True))
        for p in held:
            line = p.stdout.readline()
            assert line.startswith("SEALED"), f"a part's writer did not seal: {line!r} {p.stderr.read()}"
        r = c[coordinator].writer("--ns", ns, "--step", STEP, "--objects", 2, "--size", MiB + 512, "--prefix",
                                  f"{coordinator}_", "--seed", 99, "--ref-dir", refs[coordinator], "--members",
                                  ",".join(nodes), timeout=60, check=check)
    finally:
        for p in held:
            if p.poll() is None:
                p.stdin.close()
                p.wait(timeout=30)
    return refs if check else (refs, r)


def spanning_step_redundant_in_group_0(c, ns, tmp_path):
    """A step (ns, STEP) spanning every node, coordinated by group 0's first member, once every member of
    group 0 reports it redundant; returns group 0's members and each node's reference copy."""
    data, _ = c.groups()[0]
    refs = commit_spanning_step(c, ns, data[0], tmp_path)
    for node in data:
        wait_for(lambda: (c.step_state(node, ns, STEP) or {}).get("state") == "redundant",
                 what=f"{node} to report {ns}/{STEP} redundant: {c.step_state(node, ns, STEP)}")
    return data, refs


def test_with_one_replica_a_dead_members_objects_are_read_through_another_node_rebuilt_from_parity(
        cluster, tmp_path):
    # Decision 158, a degraded read: a step spanning all six agents, no replicas, nothing persisted. One
    # member is SIGKILLed and not replaced; a reader on the coordinator asks for that member's objects. The
    # coordinator finds neither the member nor a replica, rebuilds the member's part from its group's
    # survivors into its copy of that member's parts, and serves the objects byte-identical. Before, the read
    # failed with "object … is in no part of s/3" (no durable tier to fall back to).
    from tierckpt import _tierckpt  # noqa: PLC0415 - the client the PyTorch front reads through

    c = cluster(6, "--replicas", "1")
    data, refs = spanning_step_redundant_in_group_0(c, "s", tmp_path)
    coordinator, victim = data[0], data[1]
    c[victim].kill(signal.SIGKILL)
    client = _tierckpt.Client.connect(str(c[coordinator].socket))
    names = sorted(p.name for p in refs[victim].iterdir() if p.is_file())
    assert names, refs[victim]
    for name in names:
        view = client.open_verified("s", STEP, name)
        assert bytes(view.data) == (refs[victim] / name).read_bytes(), name
    log = c[coordinator].log_text()
    assert f"event=part_unreachable ns=s step={STEP} origin={victim}" in log, log[-3000:]
    assert f"event=part_rebuilt_from_parity ns=s step={STEP} group=0 member={victim}" in log, log[-3000:]
    assert log.count("event=part_rebuilt_from_parity") == 1, log[-3000:]  # the second object read the copy
    # An object of no part (a name the step does not hold) is still not found, naming the parity too.
    try:
        client.open_verified("s", STEP, "no_such_object.bin")
        raise AssertionError("an object of no part was served")
    except Exception as e:  # noqa: BLE001 - the binding's error class
        assert "or their groups' parity" in str(e), e


def test_with_one_replica_a_dead_members_part_is_persisted_by_another_node_rebuilt_from_parity(cluster, tmp_path):
    # Decision 159, a persist takeover from rebuilt data: a step spanning all six agents (one durable directory
    # for all), committed in memory only, no replicas. One member is SIGKILLed; then the step is persisted
    # from the coordinator. The member owes its part, and no holder of its replicas exists to upload it
    # instead: the waiting node rebuilds the part from the member's group's parity and uploads it as the
    # member's part, and the step becomes durable whole. Before, the persist waited for --parts-wait and
    # failed naming the member.
    durable = tmp_path / "shared-durable"
    c = cluster(6, "--replicas", "1", "--takeover-after", "1", durable=durable)
    data, refs = spanning_step_redundant_in_group_0(c, "t", tmp_path)
    coordinator, victim = data[0], data[1]
    c[victim].kill(signal.SIGKILL)
    c[coordinator].cli("persist", "t", STEP, "--wait", "--timeout", 90, timeout=120)
    step_dir = durable / "t" / f"step_{STEP:010d}"
    for node, ref in refs.items():
        for p in ref.iterdir():
            assert (step_dir / p.name).read_bytes() == p.read_bytes(), (node, p.name)
    manifest = json.loads((step_dir / "_tierckpt_manifest.json").read_text())
    placed = {o["name"]: o.get("node") for o in manifest["objects"]}
    assert sorted(n for n, node in placed.items() if node == victim) == sorted(p.name for p in refs[victim].iterdir()), \
        placed
    log = c[coordinator].log_text()
    takeover = [line for line in log.splitlines() if "event=part_takeover" in line and f"origin={victim}" in line]
    assert takeover and "from parity group 0" in takeover[0], log[-4000:]
    assert "part_rebuilt_from_parity" in log, log[-4000:]
    # `verify` on a live member checks the whole durable step and that it holds that member's part as in memory.
    verified = c[data[2]].cli("verify", "t", STEP).stdout
    assert "durable  ok" in verified, verified


def test_the_scrub_finds_a_rotten_parity_piece_on_a_running_holder_and_drops_its_group(cluster):
    # Decision 160: before, a holder checked its pieces only at its start (decision 132); a piece that rotted
    # while it ran was found only by a rebuild that needed it. Now each scrub pass re-hashes every sealed
    # group against its record and drops a group that fails; the member's next commit learns it.
    c = cluster(6, "--scrub-interval", "300ms", "--peer-timeout-ms", "3000")
    data, holders = c.groups()[0]
    for i, node in enumerate(data):
        write_part(c[node], "q", STEP, i)
    for node in data:
        wait_for(lambda: (c.step_state(node, "q", STEP) or {}).get("state") == "redundant",
                 what=f"{node} to report q/{STEP} redundant")
    victim = holders[0]
    flip_byte(c.group_dir(victim, "q", STEP, 0) / "parity_0", 1000)
    wait_for(lambda: not c.group_dir(victim, "q", STEP, 0).exists(), timeout=30,
             what=f"{victim}'s scrub to drop the group: {c[victim].log_text()[-2000:]}")
    errors = json.loads(c[victim].cli("agent", "status", "--json").stdout).get("last_errors", [])
    assert any("parity group 0 of q step 3" in e and "has checksum" in e for e in errors), errors
    assert "event=parity_scrub_corrupt ns=q step=3 group=0" in c[victim].log_text()
    assert c.group_dir(holders[1], "q", STEP, 0).exists()  # the other holder's piece is sound and kept
    write_part(c[data[0]], "q", STEP + 1, 0)
    wait_for(lambda: c.step_state(data[0], "q", STEP)["state"] == "incomplete",
             what=f"{data[0]} to notice: {c.step_state(data[0], 'q', STEP)}")


def test_with_parity_ack_all_a_spanning_commit_waits_for_every_members_group_and_says_which_is_not_sealed(
        agents, tmp_path):
    # Decision 161. rs:2+2 over eight agents: four groups of two. A step spans the members of the coordinator's
    # group and of one other group; a parity holder of that other group, itself no member of the step and no
    # holder of the coordinator's group, is SIGSTOPped. The coordinator's own group seals, and the other
    # members' parts are committed down the tree without waiting (decision 146); the commit must not return
    # success while those parts are not redundant: it waits for their group and fails naming it. Before, it
    # returned success with that group never sealed.
    c = Cluster(agents, tmp_path, 8, ("--redundancy", "rs:2+2", "--replicas", "1", "--peer-timeout-ms", "3000"))
    groups = c.groups()
    coordinator = sorted(groups[0][0])[0]
    own = next(g for g, (data, _) in groups.items() if coordinator in data)
    choice = None
    for other, (data, holders) in groups.items():
        if other == own:
            continue
        members = set(groups[own][0]) | set(data)
        stoppable = [h for h in holders if h not in members and h not in groups[own][1]]
        if stoppable:
            choice = (other, sorted(members), stoppable[0])
            break
    assert choice, groups
    other, members, stopped = choice
    c[stopped].signal(signal.SIGSTOP)
    try:
        started = time.time()
        _, r = commit_spanning_step(c, "w", coordinator, tmp_path, members=members, check=False)
        said = r.stdout + r.stderr
        assert r.returncode != 0, said
        assert f"is not sealed for group {other} of its members" in said and stopped in said, said
        assert "the step is committed on every member" in said, said
        assert time.time() - started < 40
        # Every member's part is committed; the coordinator's own group is redundant.
        assert c.step_state(coordinator, "w", STEP)["state"] == "redundant"
        for node in members:
            assert c[node].steps("w")[STEP]["memory"] == "committed", node
    finally:
        c[stopped].signal(signal.SIGCONT)


def test_ls_has_no_parity_column_without_redundancy(agent):
    agent.writer("--ns", "p", "--step", 1, "--objects", 1, "--size", 4096)
    assert agent.cli("ls", "p").stdout.splitlines()[0].split()[-1] == "DURABLE"
    assert "parity" not in agent.cli_json("ls", "p")["steps"][0]
