"""Memory budget: eviction by policy, clear errors, the newest step kept."""
import os
import subprocess
import uuid
from pathlib import Path

import pytest

from conftest import assert_dirs_equal

MiB = 1 << 20


def test_retention_keeps_last_k(agents):
    a = agents("--memory-budget", "256MiB", "--keep-last", "2")
    for step in range(1, 6):
        a.writer("--ns", "r", "--step", step, "--objects", 2, "--size", MiB)
    mem = sorted(s for s, v in a.steps("r").items() if v["memory"] == "committed")
    assert mem == [4, 5]


def test_budget_pressure_evicts_old_steps_and_keeps_newest(agents, tmp_path):
    a = agents("--memory-budget", "64MiB", "--keep-last", "10")
    refs = {}
    for step in range(1, 6):  # 5 x 20 MiB into 64 MiB: old steps must go
        refs[step] = tmp_path / f"ref{step}"
        a.writer("--ns", "b", "--step", step, "--objects", 4, "--size", 5 * MiB,
                 "--ref-dir", refs[step])
    mem = sorted(s for s, v in a.steps("b").items() if v["memory"] == "committed")
    assert 5 in mem and len(mem) <= 3 and 1 not in mem
    out = tmp_path / "out"
    a.cli("restore", "b", 5, "--to", out)
    assert_dirs_equal(refs[5], out)
    status = a.cli_json("agent", "status")
    assert status["used_bytes"] <= status["budget_bytes"]
    # Retention (10) would keep them all: the budget dropped them, and the status says so.
    assert status["budget_evictions"] == 5 - len(mem), status
    text = a.cli("agent", "status").stdout
    assert f"evictions      {5 - len(mem)} committed step(s) dropped to make room" in text, text
    assert "raise --memory-budget or lower --keep-last" in text, text


def test_retention_alone_reports_no_budget_eviction(agents):
    a = agents("--memory-budget", "256MiB", "--keep-last", "1")
    for step in range(1, 4):
        a.writer("--ns", "calm", "--step", step, "--objects", 1, "--size", MiB)
    assert a.cli_json("agent", "status")["budget_evictions"] == 0
    assert "evictions" not in a.cli("agent", "status").stdout


def test_step_larger_than_budget_is_a_clear_error_and_loses_nothing(agents, tmp_path):
    a = agents("--memory-budget", "32MiB")
    ref = tmp_path / "ref"
    a.writer("--ns", "big", "--step", 1, "--objects", 2, "--size", 4 * MiB, "--ref-dir", ref)
    r = a.writer("--ns", "big", "--step", 2, "--objects", 3, "--size", 16 * MiB, check=False)
    assert r.returncode != 0
    assert "budget" in r.stderr, r.stderr
    steps = a.steps("big")
    assert steps[1]["memory"] == "committed"
    assert 2 not in steps or steps[2]["memory"] != "committed"
    out = tmp_path / "out"
    a.cli("restore", "big", 1, "--to", out)
    assert_dirs_equal(ref, out)


def test_budget_larger_than_tmpfs_fails_at_start(agents, tmp_path):
    """Docker's 64 MB /dev/shm: a clear error at start, not SIGBUS later."""
    small = tmp_path / "small_shm"
    small.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(small)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a 64 MiB tmpfs here (needs root): {r.stderr.strip()}")
    try:
        a = agents("--memory-budget", "1GiB", root=small / "root", start=False)
        a.start(wait=False)
        rc = a.proc.wait(timeout=20)
        assert rc != 0
        log = a.log_text()
        assert "budget" in log and "free" in log, log
        assert "shm-size" in log or "sizeLimit" in log, log
        # A budget that fits starts fine on the same mount.
        b = agents("--memory-budget", "32MiB", root=small / "root2")
        b.writer("--ns", "s", "--step", 1, "--objects", 2, "--size", MiB)
        b.kill()
    finally:
        subprocess.run(["umount", "-l", str(small)], capture_output=True)


def _wait_log(a, needle, count=1, timeout=30):
    """The count-th log line holding needle (the log survives restarts)."""
    import time
    deadline = time.time() + timeout
    while time.time() < deadline:
        lines = [ln for ln in a.log_text().splitlines() if needle in ln]
        if len(lines) >= count:
            return lines[count - 1]
        time.sleep(0.05)
    raise AssertionError(f"no log line with {needle!r}: {a.log_text()[-2000:]}")


def test_preallocate_fills_the_pool_at_start_and_saves_write_into_it(agents, tmp_path):
    a = agents("--memory-budget", "96MiB", "--preallocate", "32MiB", "--preallocate-segment", "8MiB")
    line = _wait_log(a, "event=preallocated")
    assert "bytes=33554432 segments=4" in line and "stopped=done" in line, line
    status = a.cli_json("agent", "status")
    assert (status["pool_bytes"], status["pool_segments"], status["used_bytes"]) == (32 * MiB, 4, 32 * MiB)
    ref = tmp_path / "ref"
    a.writer("--ns", "p", "--step", 1, "--objects", 4, "--size", 8 * MiB, "--ref-dir", ref)
    status = a.cli_json("agent", "status")
    assert status["pool_segments"] == 0, status  # every object took a preallocated segment
    assert status["used_bytes"] == 32 * MiB, status  # no more memory than the step itself
    out = tmp_path / "out"
    a.cli("restore", "p", 1, "--to", out)
    assert_dirs_equal(ref, out)
    # After a SIGKILL the committed step is recovered and the pool topped up again.
    a.restart()
    line = _wait_log(a, "event=preallocated", count=2)
    status = a.cli_json("agent", "status")
    assert status["pool_bytes"] == 32 * MiB and status["used_bytes"] == 64 * MiB, (line, status)
    assert a.steps("p")[1]["memory"] == "committed"
