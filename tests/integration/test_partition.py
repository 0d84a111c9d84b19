"""What a partition does to three agents on hosts of their own (issue 42 item 1, docs/reliability.md,
"What the system promises under a partition").

Three real tierckptd, n1..n3, each in a network namespace of its own on one switch
(tests/harness/netns.py), R = 2 on the ring (n1's holder is n2, n2's is n3, n3's is n1), one shared
durable directory. n1 is cut from the other two (both ways, silently): the majority keeps
committing within itself, saves whose holder is across the cut fail naming it, a spanning step with
a member across the cut is not committed (its coordinator commits nothing), and a replacement of n1 on the minority side restores its
step from the durable tier, saying why its holder could not serve it. After the heal, everything
works as before the cut.
"""
import json
import shutil
import signal
import subprocess

import pytest

from conftest import CLI_BIN, WRITER_BIN, assert_dirs_equal
from netns import Hosts, unavailable

KiB = 1 << 10


@pytest.fixture
def three(agents, tmp_path):
    why = unavailable()
    if why:
        pytest.skip(why)
    hosts = Hosts(3)
    secret = tmp_path / "secret"
    secret.write_bytes(b"partition-test-cluster-secret-0123456789\n")
    secret.chmod(0o600)
    hostfile = tmp_path / "hosts"
    hostfile.write_text("".join(f"n{i} {hosts.ip[i]}:7100\n" for i in (1, 2, 3)))
    durable = tmp_path / "durable"
    durable.mkdir()
    made = {}
    try:
        for i in (1, 2, 3):
            a = agents("--memory-budget", "64MiB", "--node-id", f"n{i}", "--peers", hostfile, "--peer-secret-file",
                       secret, "--replicas", "2", "--replica-ack", "all", "--peer-timeout-ms", "2000",
                       "--commit-fan-out", "2", start=False)
            a.prefix = hosts.prefix(i)
            a.durable = durable
            a.start()
            made[f"n{i}"] = a
        yield hosts, made
    finally:
        for a in made.values():
            a.kill()
        hosts.close()


def save(agent, ns, step, ref=None, check=True):
    args = ["--ns", ns, "--step", step, "--objects", 2, "--size", 64 * KiB, "--persist", "--wait-durable"]
    return agent.writer(*args, *(["--ref-dir", ref] if ref else []), check=check)


def test_the_majority_commits_a_save_across_the_cut_fails_naming_the_holder_and_healing_restores_it(three, tmp_path):
    hosts, n = three
    hosts.partition([[1], [2, 3]])
    save(n["n2"], "maj", 1)  # n2's holder n3 is on its side
    assert n["n3"].root.joinpath("replicas", "n2", "ns", "maj", "step_0000000001").is_dir()
    r = save(n["n3"], "across", 1, check=False)  # n3's holder n1 is across the cut
    assert r.returncode != 0
    assert "replicating across step 1 of node n3 failed on n1" in r.stderr, r.stderr
    assert n["n3"].steps("across")[1]["memory"] == "committed"  # committed here, without its replica
    r = save(n["n1"], "minority", 1, check=False)  # and on the minority side: n1's holder n2 is across
    assert r.returncode != 0 and "failed on n2" in r.stderr, r.stderr
    assert n["n1"].steps("minority")[1]["memory"] == "committed"
    hosts.heal()
    save(n["n3"], "across", 2)
    assert n["n1"].root.joinpath("replicas", "n3", "ns", "across", "step_0000000002").is_dir()


def test_a_spanning_step_with_a_member_across_the_cut_is_not_committed_by_its_coordinator(three, tmp_path):
    hosts, n = three
    ref = tmp_path / "ref"
    holders = []
    for i, node in ((2, "n2"), (3, "n3")):  # n2 and n3 seal their parts and hold them
        p = subprocess.Popen([WRITER_BIN, "--socket", n[node].socket, "--ns", "span", "--step", "1", "--objects", "1",
                              "--size", "4096", "--prefix", f"{node}_", "--seed", str(i), "--ref-dir", ref,
                              "--no-commit", "--hold"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        holders.append(p)
    try:
        for p in holders:
            line = p.stdout.readline()
            assert line.startswith("SEALED"), f"a part's writer did not seal: {line!r} {p.stderr.read()}"
        hosts.partition([[1, 2], [3]])  # the coordinator n1 asks n2 (fan-out 2), then n3 across the cut
        r = subprocess.run([WRITER_BIN, "--socket", n["n1"].socket, "--ns", "span", "--step", "1", "--objects", "1",
                            "--size", "4096", "--prefix", "n1_", "--seed", "1", "--ref-dir", ref, "--members",
                            "n1,n2,n3"], capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
        assert r.returncode != 0, r.stdout
        assert "n3" in r.stderr, r.stderr
        # The coordinator's part (it holds .metadata, the step's commit point) is not committed, so no
        # reader sees the step; n3 never got the request. n2 committed its own part before it learned
        # of n3's failure: a part of a step no reader sees complete (docs/multinode.md).
        for node in ("n1", "n3"):
            got = subprocess.run([CLI_BIN, "--socket", n[node].socket, "ls", "span", "--json"], capture_output=True,
                                 text=True, timeout=30, check=True)
            assert not [s for s in json.loads(got.stdout)["steps"] if s["step"] == 1 and s["memory"] == "committed"], \
                f"{node} lists the spanning step as committed though n3 never committed its part: {got.stdout}"
        assert "event=commit_parts_failed" in n["n1"].log_text()
    finally:
        hosts.heal()
        for p in holders:
            if p.poll() is None:
                p.stdin.close()
                p.wait(timeout=30)


def test_a_replacement_on_the_minority_side_restores_from_durable_saying_why_its_holder_did_not_serve(three, tmp_path):
    hosts, n = three
    ref = tmp_path / "ref"
    save(n["n1"], "x", 1, ref=ref)  # replicated to n2 and durable before the cut
    hosts.partition([[1], [2, 3]])
    n["n1"].kill(signal.SIGKILL)
    shutil.rmtree(n["n1"].root, ignore_errors=True)  # a new machine for n1, still cut off
    n["n1"].start()
    out = tmp_path / "out"
    n["n1"].cli("restore", "x", 1, "--to", out)
    assert_dirs_equal(ref, out)
    log = n["n1"].log_text()
    assert "event=peer_restore_failed" in log and "next=durable" in log, log[-3000:]
    assert "event=restored_from_peer" not in log
