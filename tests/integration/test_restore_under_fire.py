"""Issue 42 item 3: restores of old durable steps while the memory budget is nearly full, and an
agent killed in the middle of a restore or of a persist. Real agents, real SIGKILLs; the slow durable tier is a
FUSE filesystem of the test's own (faulty_fs.py, root only) whose reads sleep."""
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import CLI_BIN, assert_dirs_equal
from faulty_fs import FaultyFs
from test_durable_full import start_agent_on

MiB = 1 << 20


def memory_steps(a, ns):
    return sorted(s for s, v in a.steps(ns).items() if v["memory"] == "committed")


def test_an_old_durable_step_restores_into_a_nearly_full_budget_keeping_the_newest(agents, tmp_path):
    a = agents("--memory-budget", "64MiB", "--keep-last", "10")
    refs = {}
    for step in range(1, 7):  # 6 x 20 MiB, each durable, into 64 MiB: memory keeps the newest few
        refs[step] = tmp_path / f"ref{step}"
        a.writer("--ns", "t", "--step", step, "--objects", 4, "--size", 5 * MiB, "--ref-dir", refs[step],
                 "--persist", "--wait-durable")
    before = memory_steps(a, "t")
    assert 1 not in before and 6 in before, before
    out = tmp_path / "out1"
    a.cli("restore", "t", 1, "--to", out)
    assert_dirs_equal(refs[1], out)
    after = memory_steps(a, "t")
    assert 6 in after, f"restoring step 1 evicted the newest step: {before} -> {after}"
    status = a.cli_json("agent", "status")
    assert status["used_bytes"] <= status["budget_bytes"], status
    for step in range(1, 7):  # nothing acknowledged was lost: every step restores whole
        o = tmp_path / f"check{step}"
        a.cli("restore", "t", step, "--to", o)
        assert_dirs_equal(refs[step], o)


def test_a_durable_step_larger_than_the_budget_is_a_clear_error_and_stays_durable(agents, tmp_path):
    a = agents("--memory-budget", "128MiB")
    ref = tmp_path / "ref"
    a.writer("--ns", "big", "--step", 1, "--objects", 3, "--size", 16 * MiB, "--ref-dir", ref, "--persist",
             "--wait-durable")
    # The node comes back empty with a budget smaller than the step (a new, smaller machine).
    a.kill(signal.SIGKILL)
    shutil.rmtree(a.root)
    a.extra_args = ["--memory-budget", "32MiB"]
    a.start()
    r = a.cli("restore", "big", 1, "--to", tmp_path / "out", check=False)
    assert r.returncode != 0
    assert "budget" in r.stderr, r.stderr
    # Nothing was lost: with room again, the step restores whole.
    a.kill()
    a.extra_args = ["--memory-budget", "128MiB"]
    a.start()
    out = tmp_path / "out2"
    a.cli("restore", "big", 1, "--to", out)
    assert_dirs_equal(ref, out)


@pytest.mark.skipif(os.geteuid() != 0, reason="mounts a FUSE filesystem (root only)")
def test_an_agent_killed_in_the_middle_of_a_restore_restarts_clean_and_restores_whole(agents, tmp_path):
    with FaultyFs(tmp_path / "fs") as fs:
        a = start_agent_on(agents, fs.mount, "--memory-budget", "256MiB")
        ref = tmp_path / "ref"
        a.writer("--ns", "k", "--step", 3, "--objects", 8, "--size", 2 * MiB, "--ref-dir", ref, "--persist",
                 "--wait-durable")
        a.kill(signal.SIGKILL)
        shutil.rmtree(a.root)  # the memory copy is gone: a restore must read the durable tier
        a.start()
        fs.fail("slow")  # 250 ms per read of the FUSE daemon: 16 MiB take seconds
        Path("/proc/sys/vm/drop_caches").write_text("1")  # or the kernel serves them from its cache
        restore = subprocess.Popen([str(CLI_BIN), "--socket", str(a.socket), "restore", "k", "3", "--to",
                                    str(tmp_path / "partial")], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   stdin=subprocess.DEVNULL, text=True)
        time.sleep(1.5)  # inside the restore: its reads are slow
        assert restore.poll() is None, "the restore finished before the kill; the test did not test it"
        a.kill(signal.SIGKILL)
        restore.wait(timeout=30)
        assert restore.returncode != 0
        fs.fail("")
        a.start()
        # No half-restored step is taken for a copy: memory does not hold step 3 as committed.
        assert a.steps("k")[3]["memory"] != "committed", a.steps("k")
        out = tmp_path / "out"
        a.cli("restore", "k", 3, "--to", out)
        assert_dirs_equal(ref, out)
        a.cli("verify", "k", 3)
        a.kill()


@pytest.mark.skipif(os.geteuid() != 0, reason="mounts a FUSE filesystem (root only)")
def test_an_agent_killed_in_the_middle_of_a_persist_finishes_it_after_restart(agents, tmp_path):
    with FaultyFs(tmp_path / "fs") as fs:
        a = start_agent_on(agents, fs.mount, "--memory-budget", "256MiB")
        ref = tmp_path / "ref"
        fs.fail("slow_writes")  # 250 ms per write of the FUSE daemon: the persist takes seconds
        a.writer("--ns", "p", "--step", 4, "--objects", 8, "--size", 2 * MiB, "--ref-dir", ref, "--persist")
        time.sleep(1.5)  # inside the persist
        assert a.steps("p")[4]["durable"] != "committed", "the persist finished before the kill"
        assert not (fs.mount / "p" / "step_0000000004" / "_tierckpt_manifest.json").exists()
        a.kill(signal.SIGKILL)
        fs.fail("")
        a.start()  # the step is still in memory with its persist marker: the agent persists it again
        a.cli("persist", "p", 4, "--wait", "--timeout", "60")
        assert a.steps("p")[4]["durable"] == "committed"
        # Whole in the durable tier: restored from it alone.
        a.kill(signal.SIGKILL)
        shutil.rmtree(a.root)
        a.start()
        out = tmp_path / "out"
        a.cli("restore", "p", 4, "--to", out)
        assert_dirs_equal(ref, out)
        a.kill()
