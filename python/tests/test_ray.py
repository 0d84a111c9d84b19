"""Ray Train (V2, from pip) with tierckpt, end to end: real Ray local clusters running
TorchTrainer with 2 CPU workers (gloo), a real agent, real SIGKILLs.

Each run is a subprocess running one of the examples (a Ray driver must not
share this process with the forkserver of the other tests).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.distributed.checkpoint as dcp

ray = pytest.importorskip("ray", reason="Ray is installed by scripts/setup.sh (requirements-dev.txt)")

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _run(script: str, agent, *args: str, env: dict | None = None, timeout: float = 420) -> str:
    full_env = dict(os.environ, TIERCKPT_SOCKET=agent.socket, TIERCKPT_AUTO_START="0", RAY_DEDUP_LOGS="0",
                    **(env or {}))
    r = subprocess.run([sys.executable, str(EXAMPLES / script), *args], capture_output=True, text=True,
                       timeout=timeout, env=full_env, stdin=subprocess.DEVNULL)
    out = r.stdout + r.stderr
    assert r.returncode == 0, f"{script} exited {r.returncode}:\n{out[-6000:]}\nagent log:\n{agent.log_text()[-3000:]}"
    return out


def _events(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _step_dirs(base: Path, ns: str) -> list[str]:
    return sorted(p.name for p in (base / ns).iterdir() if p.name.startswith("step_"))


def test_a_killed_worker_resumes_from_memory_and_a_wiped_agent_from_durable(agents, tmp_path):
    agent = agents("--memory-budget", "512MiB")
    storage = agent.durable
    results = tmp_path / "events.jsonl"
    out = _run("ray_train.py", agent, "--storage", str(storage), "--name", "rayjob", "--steps", "14",
               "--memory-every", "2", "--durable-every", "4", "--kill-at-step", "7", "--max-failures", "1",
               "--results", str(results))
    assert "Ray's latest checkpoint is " + str(storage / "rayjob" / "step_0000000012") in out, out[-3000:]
    events = _events(results)
    saved = {(e["rank"], e["step"]): e["digest"] for e in events if e["event"] == "save"}
    kills = [e for e in events if e["event"] == "kill"]
    resumes = [e for e in events if e["event"] == "resume"]
    assert [(k["rank"], k["step"]) for k in kills] == [(1, 7)]
    # Ray restarted the group; both ranks resumed from the last committed step, in memory (step 6 is
    # never persisted), with the state they had saved.
    assert sorted((r["rank"], r["step"]) for r in resumes) == [(0, 6), (1, 6)]
    for r in resumes:
        assert r["digest"] == saved[(r["rank"], 6)]
    assert not (storage / "rayjob" / "step_0000000006").exists()  # so step 6 came from memory

    # The agent loses its memory (a new node, a reboot): the next run resumes from the newest durable step.
    agent.kill()
    shutil.rmtree(agent.root, ignore_errors=True)
    agent.start()
    assert all(s["memory"] != "committed" for s in agent.steps("rayjob").values())
    results.unlink()
    out = _run("ray_train.py", agent, "--storage", str(storage), "--name", "rayjob", "--steps", "18",
               "--memory-every", "2", "--durable-every", "4", "--results", str(results))
    resumes = [e for e in _events(results) if e["event"] == "resume"]
    assert sorted((r["rank"], r["step"]) for r in resumes) == [(0, 12), (1, 12)]
    for r in resumes:
        assert r["digest"] == saved[(r["rank"], 12)]
    assert "event=restore" in agent.log_text()
    # Ray's num_to_keep=2 evicted step 8 (it tracked 8 and 12 from the first run, then 16). Steps 0
    # and 4 were reported before the first run's group restart: Ray 2.60 drops those from its list
    # without deleting them (docs/ray.md), so they are still there.
    dirs = _step_dirs(storage, "rayjob")
    assert "step_0000000008" not in dirs and dirs[-2:] == ["step_0000000012", "step_0000000016"], dirs
    meta = dcp.FileSystemReader(str(storage / "rayjob" / "step_0000000016")).read_metadata()
    assert any(k.startswith("model.") for k in meta.state_dict_metadata)


def test_the_seed_ray_example_runs_with_only_its_imports_changed(agents, tmp_path):
    agent = agents("--memory-budget", "512MiB")
    storage = agent.durable
    env = {"EXAMPLE_S3_PATH": str(storage), "EXAMPLE_EXPERIMENT": "seed-exp", "EXAMPLE_MAX_STEPS": "21",
           "EXAMPLE_CHECKPOINT_FREQ": "5", "EXAMPLE_NUM_WORKERS": "2"}
    out = _run("sagemaker_ray_train.py", agent, env=env)
    assert "Ray's latest checkpoint is " + str(storage / "seed-exp" / "step_0000000020") in out, out[-3000:]
    # Every checkpoint went to the durable tier (save_to_s3 = True); Ray kept the newest 3.
    assert _step_dirs(storage, "seed-exp") == ["step_0000000010", "step_0000000015", "step_0000000020"]
    # A second run resumes after step 20 (the seed's load_checkpoint), so it saves only step 25.
    env["EXAMPLE_MAX_STEPS"] = "26"
    log_before = len(agent.log_text())
    _run("sagemaker_ray_train.py", agent, env=env)
    commits = [line for line in agent.log_text()[log_before:].splitlines() if "event=commit " in line]
    assert commits and all("step=25 " in line for line in commits), commits


def test_ray_eviction_of_a_reported_checkpoint_deletes_an_s3_durable_step(tmp_path, monkeypatch):
    """Ray's own eviction code (the function its CheckpointManager calls for num_to_keep) on the
    Checkpoint tierckpt.ray hands Ray, with the durable tier on a real S3 server (moto)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "integration"))
    from conftest import Agent
    from s3_server import DUMMY_KEYS, MotoServer, isolated_aws_env
    from ray.train.v2._internal.execution.storage import delete_fs_path

    import tierckpt.ray
    from tierckpt.torch import CheckpointConfig, TieredWriter

    (tmp_path / "moto").mkdir()
    with MotoServer(log_dir=tmp_path / "moto") as moto:
        bucket = moto.create_bucket("rayruns")
        for k, v in {**isolated_aws_env(), **DUMMY_KEYS.env(), "AWS_ENDPOINT_URL": moto.endpoint}.items():
            monkeypatch.setenv(k, v)
        for k in [k for k in os.environ if k.startswith("AWS_") and k not in isolated_aws_env()
                  and k not in DUMMY_KEYS.env() and k != "AWS_ENDPOINT_URL"]:
            monkeypatch.delenv(k)
        workdir = tmp_path / "agent"
        workdir.mkdir()
        agent = Agent(workdir, ["--memory-budget", "256MiB"])
        agent.durable = moto.s3_url(bucket, "exp")
        agent.start()
        try:
            cfg = CheckpointConfig("run1", socket=agent.socket, durable=agent.durable, auto_start=False)
            dcp.save({"w": torch.arange(1000.0)}, storage_writer=TieredWriter(cfg, 5, persist=True), no_dist=True)
            checkpoint = tierckpt.ray.DurableUpload(cfg, 5)()  # waits for the durable commit
            assert checkpoint.path == f"{bucket}/exp/run1/step_0000000005"
            assert tierckpt.ray.DurableUpload(cfg, 5)().path == checkpoint.path  # idempotent
            s3 = moto.boto3_client()
            keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix="exp/run1/")["Contents"]]
            assert "exp/run1/step_0000000005/_tierckpt_manifest.json" in keys
            delete_fs_path(checkpoint.filesystem, checkpoint.path)
            assert s3.list_objects_v2(Bucket=bucket, Prefix="exp/run1/step_0000000005/").get("KeyCount", 0) == 0
            assert agent.steps("run1")[5]["durable"] != "committed"
        finally:
            agent.kill()
            shutil.rmtree(agent.root, ignore_errors=True)
