"""PyTorch Lightning (from pip, requirements-dev.txt) with tierckpt.lightning.TieredCheckpointIO,
end to end: a real Trainer with ModelCheckpoint, a real agent, real SIGKILLs.

Each run is a subprocess running lightning_worker.py: two ranks launched as torchrun would
(DDP over gloo on CPU), or one. No skip when lightning is missing: the import fails the module.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import lightning  # noqa: F401  (requirements-dev.txt; a missing package must fail, not skip)
import pytest
import torch
import torch.distributed.checkpoint as dcp

from tierckpt.lightning import LATEST, TieredCheckpointIO, read_pointer
from tierckpt.torch import Checkpointer, wait_durable

WORKER = Path(__file__).resolve().parent / "lightning_worker.py"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _launch(agent, world: int, *args: str) -> list[subprocess.Popen]:
    port = _free_port()
    procs = []
    for rank in range(world):
        env = dict(os.environ, TIERCKPT_SOCKET=agent.socket, TIERCKPT_AUTO_START="0",
                   TIERCKPT_DURABLE=str(agent.durable), PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1")
        if world > 1:
            env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE=str(world), RANK=str(rank),
                       LOCAL_RANK=str(rank), NODE_RANK="0")
        log = open(agent.workdir / f"rank{rank}-{len(list(agent.workdir.glob('rank*')))}.log", "w")
        procs.append(subprocess.Popen([sys.executable, str(WORKER), *args], env=env, stdout=log,
                                      stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL))
    return procs


def _wait(procs: list[subprocess.Popen], agent, timeout: float = 240) -> list[int]:
    codes = []
    try:
        for p in procs:
            codes.append(p.wait(timeout=timeout))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return codes


def _logs(agent) -> str:
    return "\n".join(f"--- {f.name}\n{f.read_text()[-3000:]}" for f in sorted(agent.workdir.glob("rank*.log")))


def _events(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _committed(agent, ns: str) -> list[int]:
    return sorted(s for s, v in agent.steps(ns).items() if v["memory"] == "committed" or v["durable"] == "committed")


def test_ddp_run_killed_mid_run_resumes_from_last_with_identical_state(agent, tmp_path):
    """Two gloo ranks, AsyncCheckpointIO(TieredCheckpointIO), ModelCheckpoint every 2 steps with
    save_last; rank 0 SIGKILLed at step 7, then rank 1. The rerun resumes with ckpt_path="last"
    at step 6 from memory, with the model, optimizer, scheduler and loop state saved there."""
    ckpts, events = tmp_path / "ckpts", tmp_path / "events.jsonl"
    common = ["--ckpt-dir", str(ckpts), "--namespace", "lit", "--events", str(events), "--max-steps", "12"]
    procs = _launch(agent, 2, *common, "--kill-at", "7", "--async-save")
    codes = [procs[0].wait(timeout=240)]
    procs[1].send_signal(signal.SIGKILL)  # the whole node goes: rank 1 too
    codes += _wait(procs[1:], agent)
    assert codes[0] == -signal.SIGKILL, f"rank 0 exited {codes[0]}, not by its SIGKILL:\n{_logs(agent)}"
    first = _events(events)
    saved = {e["step"]: e for e in first if e["event"] == "save" and e["rank"] == 0}
    assert sorted(saved) == [2, 4, 6], first
    assert _committed(agent, "lit") == [2, 4, 6]
    assert read_pointer(ckpts / "last.ckpt")["step"] == 6
    assert read_pointer(ckpts / "epoch=0-step=4.ckpt")["step"] == 4

    events.unlink()
    procs = _launch(agent, 2, *common, "--resume", "last")
    codes = _wait(procs, agent)
    assert codes == [0, 0], f"the resumed run failed: {codes}\n{_logs(agent)}\nagent log:\n{agent.log_text()[-3000:]}"
    second = _events(events)
    loaded = [e for e in second if e["event"] == "loaded"]
    resumed = [e for e in second if e["event"] == "resume"]
    assert sorted(e["rank"] for e in loaded) == [0, 1] and sorted(e["rank"] for e in resumed) == [0, 1], second
    want = saved[6]
    for e in loaded:  # the dict every rank got back is the one rank 0 saved
        assert (e["step"], e["epoch"], e["model"], e["optim"], e["sched"], e["loops"]) == \
            (6, want["epoch"], want["model"], want["optim"], want["sched"], want["loops"]), (e, want)
    for e in resumed:  # and Lightning restored it: the live module, optimizer, scheduler and step
        assert (e["step"], e["epoch"], e["model"], e["optim"], e["sched"]) == \
            (6, want["epoch"], want["model"], want["optim"], want["sched"]), (e, want)
    assert "event=restore" not in agent.log_text()  # served from memory
    assert max(e["step"] for e in second if e["event"] == "save") == 12
    assert read_pointer(ckpts / "last.ckpt")["step"] == 12


def test_memory_lost_resumes_latest_from_durable(agents, tmp_path):
    """One process, the plugin without AsyncCheckpointIO, persist_every=4. The agent loses its
    memory (a new node): ckpt_path=LATEST resumes from step 8, restored from the durable tier,
    which plain DCP reads too; a pointer-less checkpoint Lightning wrote itself still loads."""
    agent = agents("--memory-budget", "512MiB")
    ckpts, events = tmp_path / "ckpts", tmp_path / "events.jsonl"
    common = ["--ckpt-dir", str(ckpts), "--namespace", "lit1", "--events", str(events), "--persist-every", "4"]
    codes = _wait(_launch(agent, 1, *common, "--max-steps", "10"), agent)
    assert codes == [0], _logs(agent)
    saved = {e["step"]: e for e in _events(events) if e["event"] == "save"}
    assert sorted(saved) == [2, 4, 6, 8, 10]
    for step in (4, 8):  # persisted in the background
        wait_durable(agent.config("lit1"), step, 60)
    durable = {s for s, v in agent.steps("lit1").items() if v["durable"] == "committed"}
    assert durable == {4, 8}, agent.steps("lit1")

    # Durable steps are DCP checkpoints: the model's tensors under their checkpoint paths.
    meta = dcp.FileSystemReader(str(agent.durable / "lit1" / "step_0000000008")).read_metadata()
    assert "tensors.state_dict.net.0.weight" in meta.state_dict_metadata

    agent.kill()
    shutil.rmtree(agent.root, ignore_errors=True)
    agent.start()
    events.unlink()
    codes = _wait(_launch(agent, 1, *common, "--max-steps", "12", "--resume", "latest"), agent)
    assert codes == [0], _logs(agent)
    second = _events(events)
    (loaded,) = [e for e in second if e["event"] == "loaded"]
    (resumed,) = [e for e in second if e["event"] == "resume"]
    want = saved[8]
    assert (loaded["step"], loaded["model"], loaded["optim"], loaded["sched"], loaded["loops"]) == \
        (8, want["model"], want["optim"], want["sched"], want["loops"])
    assert (resumed["step"], resumed["model"], resumed["optim"], resumed["sched"]) == \
        (8, want["model"], want["optim"], want["sched"])
    assert "event=restore" in agent.log_text()  # step 8 came back from the durable tier


def test_checkpoint_structure_round_trips_and_errors_name_the_fix(agent, tmp_path):
    """Int keys, tuples, empty dicts, OrderedDicts, a shared tensor and a 0-d tensor come back as
    saved; a plain torch.save checkpoint loads; a foreign namespace and storage_options are refused."""
    from collections import OrderedDict

    io = TieredCheckpointIO(agent.config("shape"))
    w = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    ckpt = {"global_step": 5, "epoch": 0, "state_dict": OrderedDict(w=w, tied=w),
            "optimizer_states": [{"state": {0: {"step": torch.tensor(3.0), "exp_avg": w * 2}}, "param_groups":
                                  [{"params": [0], "betas": (0.9, 0.99), "lr": 0.1}]}],
            "loops": {"fit_loop": {"state_dict": {}, "epoch_progress": {"total": {"ready": 1}}}},
            "lr_schedulers": [], "odd": {"0": torch.ones(1), 0: torch.zeros(1)}}
    io.save_checkpoint(ckpt, tmp_path / "a.ckpt")
    back = io.load_checkpoint(tmp_path / "a.ckpt")
    assert type(back["state_dict"]) is OrderedDict and back["state_dict"]["tied"] is back["state_dict"]["w"]
    assert torch.equal(back["state_dict"]["w"], w)
    opt = back["optimizer_states"][0]
    assert list(opt["state"]) == [0] and opt["param_groups"][0]["betas"] == (0.9, 0.99)
    assert opt["state"][0]["step"].shape == () and torch.equal(opt["state"][0]["exp_avg"], w * 2)
    assert back["loops"] == ckpt["loops"] and back["lr_schedulers"] == []
    assert torch.equal(back["odd"]["0"], torch.ones(1)) and torch.equal(back["odd"][0], torch.zeros(1))

    # A second save of the step this plugin saved last points at it (save_last="link"); one by a
    # new plugin (a rerun from an older checkpoint) replaces it, as torch.save over a file does.
    io.save_checkpoint({**ckpt, "state_dict": OrderedDict(w=w + 1)}, tmp_path / "b.ckpt")
    assert torch.equal(io.load_checkpoint(tmp_path / "b.ckpt")["state_dict"]["w"], w)
    io = TieredCheckpointIO(agent.config("shape"))
    io.save_checkpoint({**ckpt, "state_dict": OrderedDict(w=w + 1)}, tmp_path / "b.ckpt")
    assert torch.equal(io.load_checkpoint(tmp_path / "a.ckpt")["state_dict"]["w"], w + 1)
    io.remove_checkpoint(tmp_path / "a.ckpt")
    assert not (tmp_path / "a.ckpt").exists() and agent.steps("shape")[5]["memory"] == "committed"

    torch.save({"global_step": 1, "w": w}, tmp_path / "plain.ckpt")
    assert torch.equal(io.load_checkpoint(tmp_path / "plain.ckpt")["w"], w)
    with pytest.raises(ValueError, match="namespace 'shape'.*TieredCheckpointIO of that namespace"):
        TieredCheckpointIO(agent.config("other")).load_checkpoint(tmp_path / "b.ckpt")
    with pytest.raises(FileNotFoundError, match="no step every rank can load"):
        TieredCheckpointIO(agent.config("empty")).load_checkpoint(LATEST)
    with pytest.raises(TypeError, match="persist_every"):
        io.save_checkpoint(ckpt, tmp_path / "c.ckpt", storage_options={"x": 1})
    Checkpointer(agent.config("dcp")).save(2, {"w": w})
    with pytest.raises(ValueError, match="not a Lightning checkpoint saved by TieredCheckpointIO"):
        TieredCheckpointIO(agent.config("dcp")).load_checkpoint(LATEST)


def test_without_lightning_the_import_names_the_pip_command():
    r = subprocess.run([sys.executable, "-c", "import sys; sys.modules['lightning'] = None; import tierckpt.lightning"],
                       capture_output=True, text=True, stdin=subprocess.DEVNULL)
    assert r.returncode != 0 and "ImportError: tierckpt.lightning needs PyTorch Lightning" in r.stderr, r.stderr
    assert "pip install 'lightning==2.6.6'" in r.stderr
