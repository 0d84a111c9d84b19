"""Failure model: writer and agent killed with SIGKILL at bad moments."""
import json
import signal
import time

from conftest import assert_dirs_equal


def partial_dirs(agent):
    return [p for p in agent.root.rglob("*.partial")]


def wait_for(pred, timeout=10.0, what="condition"):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if pred():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def test_writer_sigkilled_mid_object(agent, tmp_path):
    ref = tmp_path / "ref1"
    agent.writer("--ns", "job", "--step", 1, "--objects", 3, "--size", 1 << 20, "--ref-dir", ref)
    w = agent.writer_popen("--ns", "job", "--step", 2, "--objects", 3, "--size", 1 << 20,
                           "--hang-in-object", 1)
    line = w.stdout.readline()
    assert line.startswith("HANG"), line + w.stderr.read()
    assert agent.steps("job").get(2, {}).get("memory") != "committed"
    w.send_signal(signal.SIGKILL)
    w.wait()
    # The partial step is dropped once its writer is gone.
    wait_for(lambda: not partial_dirs(agent), what="partial step cleanup")
    steps = agent.steps("job")
    assert 2 not in steps or steps[2]["memory"] == ""
    assert steps[1]["memory"] == "committed"
    out = tmp_path / "out"
    agent.cli("restore", "job", 1, "--to", out)
    assert_dirs_equal(ref, out)
    assert agent.proc.poll() is None


def test_agent_sigkilled_after_commit_serves_identical_bytes(agent, tmp_path):
    refs = {}
    for step in (10, 11):
        refs[step] = tmp_path / f"ref{step}"
        agent.writer("--ns", "job", "--step", step, "--objects", 4, "--size", 2 << 20,
                     "--ref-dir", refs[step])
    agent.kill(signal.SIGKILL)
    agent.start()
    steps = agent.steps("job")
    assert steps[10]["memory"] == "committed" and steps[11]["memory"] == "committed"
    for step in (10, 11):
        out = tmp_path / f"out{step}"
        agent.cli("restore", "job", step, "--to", out)
        assert_dirs_equal(refs[step], out)
    assert agent.cli("verify", "job", 11).returncode == 0


def test_agent_sigkilled_mid_write_drops_partial_on_restart(agent, tmp_path):
    ref = tmp_path / "ref"
    agent.writer("--ns", "job", "--step", 1, "--objects", 2, "--size", 1 << 20, "--ref-dir", ref)
    w = agent.writer_popen("--ns", "job", "--step", 2, "--objects", 2, "--size", 1 << 20,
                           "--hang-in-object", 1)
    assert w.stdout.readline().startswith("HANG")
    agent.kill(signal.SIGKILL)
    w.kill()
    w.wait()
    agent.start()
    assert not partial_dirs(agent)
    steps = agent.steps("job")
    assert steps[1]["memory"] == "committed"
    assert 2 not in steps or steps[2]["memory"] != "committed"
    # The step number can be written again after the crash.
    agent.writer("--ns", "job", "--step", 2, "--objects", 2, "--size", 1 << 20)
    assert agent.steps("job")[2]["memory"] == "committed"


def test_truncated_object_on_tmpfs_is_not_served_after_restart(agent, tmp_path):
    agent.writer("--ns", "job", "--step", 1, "--objects", 2, "--size", 1 << 20, "--persist",
                 "--wait-durable")
    agent.writer("--ns", "job", "--step", 2, "--objects", 2, "--size", 1 << 20)
    agent.kill(signal.SIGKILL)
    victim = next(agent.root.rglob("step_0000000001/obj_1.bin"))
    with open(victim, "r+b") as f:
        f.truncate(1000)
    agent.start()
    steps = agent.steps("job")
    # Step 1 is no longer in memory (size check failed) but is still durable.
    assert steps[1]["memory"] != "committed"
    assert steps[1]["durable"] == "committed"
    assert "obj_1.bin" in agent.log_text()
    out = tmp_path / "out"
    agent.cli("restore", "job", 1, "--to", out)
    assert (out / "obj_1.bin").stat().st_size == 1 << 20


def test_agent_sigkilled_right_after_a_commit_before_its_hash(agents, tmp_path):
    """--commit-before-hash (decision 68): the commit answers before the agent hashed the bytes
    (--direct: the writer sends no checksums). A SIGKILL right after the commit, before or after
    that hash landed, loses nothing: the restarted agent serves the step with the right checksums,
    and its record on the tmpfs holds them."""
    agent = agents("--memory-budget", "1GiB", "--verify-threads", "1")
    ref = tmp_path / "ref"
    # One large object: its hash starts at its seal, right before the commit, and takes tens of
    # ms; the kill comes as soon as the step's committed record is there.
    record_path = agent.root / "ns" / "job" / "step_0000000003" / "_tierckpt_manifest.json"
    w = agent.writer_popen("--ns", "job", "--step", 3, "--objects", 1, "--size", 512 << 20, "--direct",
                           "--ref-dir", ref)
    deadline = time.time() + 120
    while not record_path.exists() and w.poll() is None and time.time() < deadline:
        time.sleep(0.0005)
    agent.kill(signal.SIGKILL)
    w.wait(timeout=60)
    agent.start()
    assert agent.steps("job")[3]["memory"] == "committed"
    record = json.loads(record_path.read_text())
    assert "checksums_pending" not in record
    assert len(record["objects"]) == 1 and all(o["checksum"].startswith("xxh3-64:") for o in record["objects"])
    out = tmp_path / "out"
    agent.cli("restore", "job", 3, "--to", out)
    assert_dirs_equal(ref, out)
    assert agent.cli("verify", "job", 3).returncode == 0
    hashed_at_start = "committed before its hash; hashed now" in agent.log_text()
    print(f"the kill came {'before' if hashed_at_start else 'after'} the agent's hash")
