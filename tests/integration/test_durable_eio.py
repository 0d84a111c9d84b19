"""Issue 42 item 2 (second part): the durable filesystem returns EIO during persistence, as a dying
disk or a lost NFS server does. A FUSE passthrough of the test's own (faulty_fs.py: fusepy over
Debian's libfuse2; mount(2): root only) is the durable tier. Nothing acknowledged as durable may
be missing afterwards, the agent says in its log and in `tierckpt agent status` what it could not
persist and why (EIO), and once the filesystem answers again it persists those steps without a
restart."""
import os

import pytest

from faulty_fs import FaultyFs
from test_durable_full import assert_named_not_persisted, durable_steps, start_agent_on, wait_for

MiB = 1 << 20

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mounts a FUSE filesystem (root only)")


@pytest.mark.long
def test_a_durable_filesystem_failing_with_eio_loses_no_acknowledged_step_says_why_and_persists_after(
        agents, tmp_path):
    with FaultyFs(tmp_path / "fs") as fs:
        a = start_agent_on(agents, fs.mount, "--memory-budget", "256MiB", "--keep-last", "20")
        for step in (1, 2):
            a.writer("--ns", "eio", "--step", step, "--objects", 3, "--size", MiB, "--persist", "--wait-durable")
        fs.fail("eio")
        refused = []
        for step in (3, 4):
            r = a.writer("--ns", "eio", "--step", step, "--objects", 3, "--size", MiB, "--persist",
                         "--wait-durable", check=False)
            assert r.returncode != 0, f"step {step} was acknowledged as durable on a filesystem failing with EIO"
            refused.append(step)
        # What was durable before stays durable and readable.
        assert {1, 2} <= durable_steps(fs.mount, "eio")
        a.cli("verify", "eio", 1)
        assert_named_not_persisted(a, "eio", refused, "Input/output error")
        # The filesystem answers again: the agent persists what it could not, without a restart.
        fs.fail("")
        wait_for(lambda: {1, 2, 3, 4} <= durable_steps(fs.mount, "eio"), timeout=60,
                 what=f"steps {refused} persisted once the filesystem answered again")
        wait_for(lambda: not a.cli_json("agent", "status")["not_persisted"], timeout=30,
                 what="status to list nothing unpersisted")
        for step in (1, 2, 3, 4):
            a.cli("verify", "eio", step)
        a.kill()
