"""Issue 42 item 2 (first part): the durable filesystem fills up during
persistence. Nothing acknowledged as durable may be missing afterwards; the
agent says in its log and in `tierckpt agent status` what it could not
persist and why (ENOSPC); and it persists those steps once space returns,
without a restart. A small tmpfs of the test's own is the durable tier
(mount(2): root only)."""
import json
import os
import subprocess
import time

import pytest

from conftest import mounted_tmpfs

MiB = 1 << 20

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mounts a tmpfs (root only)")


def wait_for(pred, timeout=60, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def durable_steps(base, ns):
    """Steps whose manifest is committed in the durable directory."""
    d = base / ns
    if not d.exists():
        return set()
    return {int(p.name[5:]) for p in d.iterdir() if (p / "_tierckpt_manifest.json").exists()}


def assert_named_not_persisted(a, ns, refused, reason):
    """The agent's log, `agent status --json` and `agent status` name every step of ns in `refused` as not
    persisted, each with `reason` (the medium's error), and no other step."""
    assert reason in a.log_text(), a.log_text()[-3000:]
    failed = {f["step"]: f["error"] for f in a.cli_json("agent", "status")["not_persisted"] if f["namespace"] == ns}
    assert sorted(failed) == sorted(refused), (failed, refused)
    text = a.cli("agent", "status").stdout
    for step in refused:
        assert reason in failed[step], failed[step]
        line = next((ln for ln in text.splitlines() if ln.startswith(f"  {ns} step {step}: ")), None)
        assert line and reason in line, text


def start_agent_on(agents, durable, *args):
    """A started agent (conftest's factory) whose durable tier is the directory `durable` (a mount of the
    test's own)."""
    a = agents(*args, start=False)
    a.durable = durable
    a.start()
    return a


@pytest.mark.long
def test_a_full_durable_filesystem_loses_no_acknowledged_step_says_why_and_persists_after(agents, tmp_path):
    a = agents("--memory-budget", "256MiB", "--keep-last", "20", start=False)
    base = a.durable
    with mounted_tmpfs(base, "size=12m"):
        a.start()
        acked = []
        refused = []
        for step in range(1, 9):  # 8 steps of 3 MiB on a 12 MiB filesystem
            r = a.writer("--ns", "full", "--step", step, "--objects", 3, "--size", MiB, "--persist",
                         "--wait-durable", check=False)
            (acked if r.returncode == 0 else refused).append(step)
        assert acked and refused, (acked, refused)
        # Every step acknowledged as durable is there, whole.
        assert set(acked) <= durable_steps(base, "full"), (acked, durable_steps(base, "full"))
        # The agent says what it could not persist and why.
        assert_named_not_persisted(a, "full", refused, "No space left on device")
        # Space returns: the agent persists what it could not, without a restart.
        subprocess.run(["mount", "-o", "remount,size=64m", str(base)], check=True)
        wait_for(lambda: set(range(1, 9)) <= durable_steps(base, "full"), timeout=60,
                 what=f"steps {refused} persisted once space returned")
        wait_for(lambda: not a.cli_json("agent", "status")["not_persisted"], timeout=30,
                 what="status to list nothing unpersisted")
        for step in range(1, 9):  # whole: every object restores and verifies from the durable tier
            a.cli("verify", "full", step)
        assert "event=\"persist requeued\"" in a.log_text() or "persist requeued" in a.log_text()
        a.kill()
