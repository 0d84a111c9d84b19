"""Regressions from issue 16 (the system tried as a careless user would):
steps typed by a person, names at every documented limit, durable state that
must come from what is really there, retention and restores that must never
destroy the only copy of a step. Real agents, the real CLI.
"""
import json
import os

import pytest

from conftest import mounted_tmpfs
from conftest_s3 import bucket, moto, s3_agent  # noqa: F401  (fixtures)


def make_dir(path, files):
    path.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        p = path / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    return path


# ---- item 5: steps are decimal everywhere ----------------------------------------------

def test_cli_step_with_leading_zeros_is_decimal_not_octal(agent, tmp_path):
    src = make_dir(tmp_path / "src", {"a.bin": b"x" * 100})
    for step in (8, 64, 100):
        agent.cli("save", "j", step, "--from", src)
    # `tierckpt rm j 0100` deleted step 64 (octal) before the fix.
    agent.cli("rm", "j", "0100")
    assert sorted(agent.steps("j")) == [8, 64]
    agent.cli("save", "j", "010", "--from", src)
    assert sorted(agent.steps("j")) == [8, 10, 64]
    out = tmp_path / "out"
    agent.cli("restore", "j", "0000000010", "--to", out)
    assert (out / "a.bin").read_bytes() == b"x" * 100
    shown = agent.cli_json("show", "j", "0000000064")
    assert shown["manifest"]["step"] == 64


@pytest.mark.parametrize("typed", ["0x10", "-1", "18446744073709551616", "10000000000", "1e3", "0b1"])
def test_cli_step_that_is_not_decimal_is_refused_quoting_it(agent, tmp_path, typed):
    src = make_dir(tmp_path / "src", {"a.bin": b"y"})
    agent.cli("save", "j", 16, "--from", src)
    for args in (["rm", "j", typed], ["save", "j", typed, "--from", src], ["show", "j", typed]):
        r = agent.cli(*args, check=False)
        assert r.returncode == 2, (args, r.returncode, r.stderr)
        assert typed in r.stderr and "0 to 9999999999" in r.stderr, r.stderr
    assert sorted(agent.steps("j")) == [16]


def test_cli_integer_options_are_decimal_not_octal(agents, tmp_path):
    # --keep-memory 010 means ten, not eight.
    a = agents("--memory-budget", "256MiB", "--keep-last", "20")
    src = make_dir(tmp_path / "src", {"a.bin": b"z" * 10})
    for step in range(12):
        a.cli("save", "j", step, "--from", src)
    a.cli("prune", "j", "--keep-memory", "010")
    assert sorted(a.steps("j")) == list(range(2, 12))
    r = a.cli("prune", "j", "--keep-memory", "0x3", check=False)
    assert r.returncode == 2 and "0x3" in r.stderr


# ---- item 6: a name the system accepts is writable in every tier ------------------------

LONGEST_PARTS = ["a" * 200, "b" * 200, "c" * 200, "d" * 165]  # 768 bytes with the slashes


def longest_name_tree(tmp_path):
    src = tmp_path / "src"
    make_dir(src, {"/".join(LONGEST_PARTS): b"deep" * 1000, "e" * 200: b"wide" * 10})
    return src


def round_trip_through_durable(a, ns, src, tmp_path):
    a.cli("save", ns, 1, "--from", src, "--persist", "--wait-durable")
    a.cli("rm", ns, 1)  # memory only: the durable copy is what is left
    out = tmp_path / f"out-{ns}"
    a.cli("restore", ns, 1, "--to", out)
    for rel in ("/".join(LONGEST_PARTS), "e" * 200):
        assert (out / rel).read_bytes() == (src / rel).read_bytes(), rel
    assert a.steps(ns)[1]["memory"] == "committed"


def test_names_at_every_documented_limit_persist_and_restore_on_a_filesystem(agent, tmp_path):
    round_trip_through_durable(agent, "n" * 128, longest_name_tree(tmp_path), tmp_path)


def test_a_name_part_over_the_limit_is_refused_at_save_not_lost_at_persist(agent, tmp_path):
    src = make_dir(tmp_path / "src", {"x" * 201: b"too long"})
    r = agent.cli("save", "j", 1, "--from", src, check=False)
    assert r.returncode != 0 and "200" in r.stderr, r.stderr
    assert agent.steps("j") == {}


def test_names_at_every_documented_limit_persist_and_restore_on_s3(moto, bucket, agents, tmp_path):
    prefix = "p" * 110  # the longest prefix the limits leave room for
    a = s3_agent(agents, moto.s3_url(bucket, prefix), moto.keys)
    round_trip_through_durable(a, "n" * 128, longest_name_tree(tmp_path), tmp_path)


def test_an_s3_prefix_too_long_for_the_longest_names_is_refused_at_start(moto, bucket, agents):
    a = s3_agent(agents, moto.s3_url(bucket, "p" * 111), moto.keys, start=False)
    a.start(wait=False)
    assert a.proc.wait(timeout=30) != 0
    log = a.log_text()
    assert "prefix" in log and "at most 110 bytes" in log, log[-2000:]


# ---- items 1 and 3: durable state comes from what is really there -------------------------

def wait_until(predicate, timeout=20.0, what="condition"):
    import time  # noqa: PLC0415
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def test_a_step_whose_persist_failed_is_not_evicted_by_retention(agents, tmp_path):
    """The durable filesystem is full while step 1 persists; three saves later
    retention used to drop step 1, its only copy."""
    import subprocess  # noqa: PLC0415
    if os.geteuid() != 0:
        pytest.skip("mounting a small durable filesystem needs root (CI runs as root)")
    durable = tmp_path / "small_durable"
    durable.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(durable)], check=True)
    try:
        a = agents("--memory-budget", "256MiB", "--keep-last", "1", start=False)
        a.durable = durable
        a.start()
        src = make_dir(tmp_path / "src", {"a.bin": os.urandom(3 << 20)})
        r = a.cli("save", "j", 1, "--from", src, "--persist", "--wait-durable", check=False)
        assert r.returncode != 0 and "j/1" in r.stderr, r.stderr
        small = make_dir(tmp_path / "small", {"a.bin": b"s"})
        for step in (2, 3, 4):
            a.cli("save", "j", step, "--from", small)
        steps = a.steps("j")
        assert 1 in steps and steps[1]["memory"] == "committed", steps
        assert steps[1]["durable"] == "failed", steps
        assert 2 not in steps and 3 not in steps
        out = tmp_path / "out"
        a.cli("restore", "j", 1, "--to", out)
        assert (out / "a.bin").read_bytes() == (src / "a.bin").read_bytes()
    finally:
        subprocess.run(["umount", "-l", str(durable)], check=False)


def test_a_durable_step_whose_manifest_was_deleted_is_repaired_not_dropped(agents, tmp_path):
    a = agents("--memory-budget", "256MiB", "--keep-last", "1")
    src = make_dir(tmp_path / "src", {"a.bin": os.urandom(1 << 20)})
    a.cli("save", "j", 1, "--from", src, "--persist", "--wait-durable")
    manifest = a.durable / "j" / "step_0000000001" / "_tierckpt_manifest.json"
    manifest.unlink()
    # verify must not call this fine.
    r = a.cli("verify", "j", 1, check=False)
    assert r.returncode != 0, r.stdout + r.stderr
    assert "persist j 1 --wait" in r.stdout + r.stderr, r.stdout + r.stderr
    # persist --wait must write it again, not answer "is durable".
    a.cli("persist", "j", 1, "--wait")
    assert manifest.exists()
    a.cli("verify", "j", 1)
    # Deleted again, then retention wants the memory copy: the agent checks the
    # durable copy first and writes it again before dropping its own.
    manifest.unlink()
    a.cli("save", "j", 2, "--from", src)
    wait_until(lambda: 1 not in a.steps("j") or a.steps("j")[1]["memory"] != "committed",
               what="retention of step 1")
    assert manifest.exists(), "retention dropped the last copy of j/1"
    out = tmp_path / "out"
    a.cli("restore", "j", 1, "--to", out)
    assert (out / "a.bin").read_bytes() == (src / "a.bin").read_bytes()
    log = a.log_text()
    assert "persist" in log


# ---- item 7: a full shared tmpfs is an error at create, never a SIGBUS ---------------------

def test_a_shared_tmpfs_filled_by_another_tenant_fails_the_save_cleanly(agents, tmp_path):
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root (CI runs as root)")
    with mounted_tmpfs(tmp_path / "shm", "size=16m") as shm:
        a = agents("--memory-budget", "12MiB", root=shm / "tierckpt")
        (shm / "nccl-shm-segment").write_bytes(b"\0" * (10 << 20))  # another tenant
        src = make_dir(tmp_path / "src", {"a.bin": os.urandom(8 << 20)})
        r = a.cli("save", "j", 1, "--from", src, check=False)
        assert r.returncode == 1, (r.returncode, r.stderr)
        assert "no room left" in r.stderr and "Bad address" not in r.stderr, r.stderr
        assert a.proc.poll() is None
        (shm / "nccl-shm-segment").unlink()
        a.cli("save", "j", 2, "--from", src)
        out = tmp_path / "out"
        a.cli("restore", "j", 2, "--to", out)
        assert (out / "a.bin").read_bytes() == (src / "a.bin").read_bytes()


# ---- item 4: one writer per step -----------------------------------------------------------

def test_two_writers_of_one_step_never_mix_their_objects(agent, tmp_path):
    """Two `tierckpt save` of one namespace and step at once (two jobs): before
    the fix 14 of 40 tries committed a step mixing both writers' files."""
    import subprocess  # noqa: PLC0415
    from conftest import CLI_BIN  # noqa: PLC0415
    names = [f"shard_{i:02d}.bin" for i in range(12)]
    srcs = []
    for w in "AB":
        srcs.append(make_dir(tmp_path / f"src{w}", {n: w.encode() * (256 << 10) for n in names}))
    conflicts = 0
    for attempt in range(20):
        procs = [subprocess.Popen([str(CLI_BIN), "save", "j", str(attempt), "--from", str(src), "--threads", "4"],
                                  env=agent.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  stdin=subprocess.DEVNULL) for src in srcs]
        results = [(p.wait(timeout=120), p.stderr.read()) for p in procs]
        for p in procs:
            p.stdout.close()
            p.stderr.close()
        ok = [i for i, (rc, _) in enumerate(results) if rc == 0]
        assert len(ok) == 1, (attempt, results)
        loser_err = results[1 - ok[0]][1]
        assert "being written by" in loser_err or "already committed" in loser_err, loser_err
        conflicts += "being written by" in loser_err
        out = tmp_path / f"out{attempt}"
        agent.cli("restore", "j", attempt, "--to", out)
        winner = "AB"[ok[0]]
        for n in names:
            assert (out / n).read_bytes() == winner.encode() * (256 << 10), (attempt, n)
    assert conflicts > 0, "the two writers never overlapped; the test did not exercise the conflict"
