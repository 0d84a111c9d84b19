"""Issue 37 item 6: a symbolic link planted below a per-job durable base after the job bound it
(decision 78, docs/agent.md "Per-job durable bases").

The base is canonicalized once, at bind time; if ``<base>/<ns>`` is later replaced by a link to a
directory outside the allow-list, a persist must not land there and a durable delete must not
remove files there: both fail with an error naming the link.
"""
from __future__ import annotations

import os
import shutil

import states
from tierckpt.torch import CheckpointConfig, Checkpointer, wait_durable

STEP_1 = "step_0000000001"
STEP_2 = "step_0000000002"


def _files(root) -> set[str]:
    return {os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs}


def _bound_job(agents, tmp_path, ns):
    """An agent allowing <tmp>/allowed/*, a job of namespace ns bound to allowed/a, and an empty
    directory outside the allow-list: (agent, base, outside, cfg, checkpointer)."""
    allowed = tmp_path / "allowed"
    base = allowed / "a"
    base.mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    agent = agents("--memory-budget", "256MiB", "--durable-allow", f"{allowed}/*", durable=str(tmp_path / "default"))
    cfg = CheckpointConfig(ns, socket=agent.socket, auto_start=False, durable=str(base))
    return agent, base, outside, cfg, Checkpointer(cfg)


def test_a_link_planted_below_a_bound_base_is_not_followed(agents, tmp_path):
    ns = "linked"
    agent, base, outside, cfg, ckpt = _bound_job(agents, tmp_path, ns)
    ckpt.save(1, states.full_state(1), persist=True)
    wait_durable(cfg, 1, timeout_s=60)
    assert (base / ns / STEP_1 / "_tierckpt_manifest.json").is_file()
    ckpt.save(2, states.full_state(2))  # in memory only

    # The namespace's directory moves outside the allow-list and a link takes its place.
    moved = outside / "moved"
    os.rename(base / ns, moved)
    os.symlink(moved, base / ns)
    before = _files(outside)
    assert f"moved/{STEP_1}/_tierckpt_manifest.json" in before

    r = agent.cli("persist", ns, 2, "--wait", "--timeout", "60", check=False)
    out = r.stdout + r.stderr
    assert r.returncode != 0, out
    assert f"{base / ns} is a symbolic link" in out, out
    assert not (moved / STEP_2).exists()
    assert _files(outside) == before

    r = agent.cli("rm", ns, 1, "--durable", check=False)
    out = r.stdout + r.stderr
    assert r.returncode != 0, out
    assert f"{base / ns} is a symbolic link" in out, out
    assert _files(outside) == before  # nothing out there was deleted
    assert os.path.islink(base / ns)  # nor the link itself


def test_a_bound_base_replaced_by_a_link_is_not_written_through(agents, tmp_path):
    ns = "rebased"
    agent, base, outside, cfg, ckpt = _bound_job(agents, tmp_path, ns)
    ckpt.save(1, states.full_state(1))  # binds the base; nothing persisted yet
    shutil.rmtree(base)
    os.symlink(outside, base)

    r = agent.cli("persist", ns, 1, "--wait", "--timeout", "60", check=False)
    out = r.stdout + r.stderr
    assert r.returncode != 0, out
    assert f"{base} is a symbolic link" in out, out
    assert _files(outside) == set()
