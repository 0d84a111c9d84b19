"""The Hugging Face Transformers Trainer (from pip, requirements-dev.txt) with tierckpt.hf, end to
end: a real Trainer on a tiny GPT-2 built from a config, a real agent, real SIGKILLs.

Each run is a subprocess running hf_worker.py. No skip when transformers is missing: the import
fails the module.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import accelerate  # noqa: F401  (requirements-dev.txt; a missing package must fail, not skip)
import pytest
import transformers  # noqa: F401

from tierckpt import agent as tc_agent
from tierckpt.hf import MARKER, restore_directory, save_directory
from tierckpt.torch import wait_durable

WORKER = Path(__file__).resolve().parent / "hf_worker.py"


def _run(agent, *args: str, expect: int = 0, timeout: float = 240, wrap: list[str] | None = None) -> str:
    """hf_worker.py args (under the command wrap, e.g. tierckpt sync ... --); its output."""
    env = dict(os.environ, OMP_NUM_THREADS="1", TRANSFORMERS_VERBOSITY="warning", HF_HUB_OFFLINE="1")
    if agent is not None:
        env.update(TIERCKPT_SOCKET=agent.socket, TIERCKPT_AUTO_START="0", TIERCKPT_DURABLE=str(agent.durable))
    r = subprocess.run([*(wrap or []), sys.executable, str(WORKER), *args], capture_output=True, text=True,
                       timeout=timeout, env=env, stdin=subprocess.DEVNULL)
    out = r.stdout + r.stderr
    assert r.returncode == expect, (f"hf_worker.py {' '.join(args)} exited {r.returncode}, not {expect}:\n{out[-5000:]}"
                                    + (f"\nagent log:\n{agent.log_text()[-2000:]}" if agent is not None else ""))
    return out


def _events(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _state(e: dict) -> tuple:
    return e["step"], e["model"], e["optim"], e["sched"]


def test_trainer_killed_mid_save_resumes_from_newest_committed_then_from_durable(agent, tmp_path):
    """save_steps=2, persist_every=4. Killed in the save of step 8 (its checkpoint-8 lacks
    trainer_state.json, step 8 never committed): resume_checkpoint gives checkpoint-6, from memory,
    with the model, optimizer and scheduler saved there, and the rerun saves at step 8 exactly what
    the killed run had (data order and RNG restored). Then the agent and output_dir are lost:
    the next resume restores step 8 from the durable tier."""
    out, events = tmp_path / "out", tmp_path / "events.jsonl"
    common = ["--output-dir", str(out), "--events", str(events), "--persist-every", "4"]
    _run(agent, *common, "--kill-at", "8", expect=-signal.SIGKILL)
    first = _events(events)
    saved = {e["step"]: e for e in first if e["event"] == "save"}
    assert sorted(saved) == [2, 4, 6, 8], first
    wait_durable(agent.config("hf"), 4, 60)  # persisted in the background
    steps = agent.steps("hf")
    assert sorted(steps) == [2, 4, 6] and steps[4]["durable"] == "committed", steps
    assert (out / "checkpoint-8").is_dir() and not (out / "checkpoint-8" / "trainer_state.json").exists()

    events.unlink()
    log = _run(agent, *common)
    second = _events(events)
    starts = [e for e in second if e["event"] == "start"]
    assert [s["resume"] for s in starts] == [str(out / "checkpoint-6")], second
    assert "checkpoint-8 in" in log and "never committed" in log, log[-3000:]
    (resumed,) = [e for e in second if e["event"] == "resume"]
    assert _state(resumed) == _state(saved[6])
    again = {e["step"]: e for e in second if e["event"] == "save"}
    assert _state(again[8]) == _state(saved[8])  # bit-identical training after the resume
    assert "event=restore" not in agent.log_text()  # served from memory
    wait_durable(agent.config("hf"), 8, 60)
    steps = agent.steps("hf")
    assert {s for s, v in steps.items() if v["durable"] == "committed"} == {4, 8}, steps
    assert (out / "checkpoint-6" / MARKER).exists()

    # A new node: no agent memory, no output_dir. Step 8 (10 is newer but memory-only) comes back
    # from the durable tier, whose copy is a directory laid out like checkpoint-8.
    assert sorted(p.name for p in (agent.durable / "hf" / "step_0000000008").iterdir() if not p.name.startswith("_")) \
        == sorted(p.name for p in (out / "checkpoint-8").iterdir())
    agent.kill()
    shutil.rmtree(agent.root, ignore_errors=True)
    shutil.rmtree(out)
    agent.start()
    events.unlink()
    _run(agent, *common, "--max-steps", "12")
    third = _events(events)
    assert [s["resume"] for s in third if s["event"] == "start"] == [str(out / "checkpoint-8")]
    (resumed,) = [e for e in third if e["event"] == "resume"]
    assert _state(resumed) == _state(again[8])
    assert "event=restore" in agent.log_text()


def test_two_processes_killed_resume_from_the_step_process_0_committed(agent, tmp_path):
    """DDP over gloo, 2 processes launched as torchrun would: the callback's barrier lets process 0
    save checkpoint-N with both processes' rng_state_<rank>.pth. Process 0 is SIGKILLed at step 7,
    process 1 after it; in the rerun both call resume_checkpoint (one restores, the other finds it
    restored) and resume from checkpoint-6 with the state saved there."""
    out, events = tmp_path / "out", tmp_path / "events.jsonl"
    common = [sys.executable, str(WORKER), "--output-dir", str(out), "--events", str(events), "--max-steps", "8"]

    def launch(*args: str) -> list[subprocess.Popen]:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        procs = []
        for rank in range(2):
            env = dict(os.environ, OMP_NUM_THREADS="1", TRANSFORMERS_VERBOSITY="warning", HF_HUB_OFFLINE="1",
                       PYTHONFAULTHANDLER="1",  # a rank dying on a signal prints its stacks into its log
                       TIERCKPT_SOCKET=agent.socket, TIERCKPT_AUTO_START="0", TIERCKPT_DURABLE=str(agent.durable),
                       MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE="2", RANK=str(rank),
                       LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE="2")
            log = open(tmp_path / f"rank{rank}-{len(list(tmp_path.glob('rank*')))}.log", "w")
            procs.append(subprocess.Popen([*common, *args], env=env, stdout=log, stderr=subprocess.STDOUT,
                                          stdin=subprocess.DEVNULL))
        return procs

    def logs(codes: list | None = None) -> str:
        """The exit codes, then each run's logs, the newest run first (its failure is what matters)."""
        files = sorted(tmp_path.glob("rank*.log"), key=lambda f: -int(f.stem.split("-")[1]))
        ends = [e for e in _events(events) if e["event"] == "end"] if events.exists() else []
        return (f"exit codes {codes}; 'end' (train() returned) from ranks {[e['rank'] for e in ends]}\n"
                + "\n".join(f"--- {f.name}\n{f.read_text()[-4000:]}" for f in files)
                + f"\n--- agent log\n{agent.log_text()[-2000:]}")

    def wait_all(procs: list[subprocess.Popen], timeout: float, only_first: bool = False) -> list:
        """The exit codes; a rank still running at the deadline is sent SIGABRT first, so that
        PYTHONFAULTHANDLER writes every thread's stack into its log, and the test fails with the logs
        (a hang at the end of a run was seen once in CI, at barrier or destroy_process_group)."""
        deadline = time.monotonic() + timeout
        codes = []
        for p in procs[:1] if only_first else procs:
            try:
                codes.append(p.wait(timeout=max(0.1, deadline - time.monotonic())))
            except subprocess.TimeoutExpired:
                for q in procs:
                    if q.poll() is None:
                        q.send_signal(signal.SIGABRT)
                time.sleep(3)
                raise AssertionError(f"a rank did not finish within {timeout} s (SIGABRT: its stacks are in its "
                                     f"log)\n{logs([q.poll() for q in procs])}") from None
        return codes

    procs = launch("--kill-step", "7")
    try:
        assert wait_all(procs, 240, only_first=True) == [-signal.SIGKILL], logs()
    finally:
        for p in procs:
            p.kill()
            p.wait()
    saved = {e["step"]: e for e in _events(events) if e["event"] == "save" and e["rank"] == 0}
    assert sorted(saved) == [2, 4, 6] and sorted(agent.steps("hf")) == [2, 4, 6]
    shown = json.loads(agent.cli("--json", "show", "hf", 6).stdout)["manifest"]["objects"]
    assert {"rng_state_0.pth", "rng_state_1.pth"} <= {o["name"] for o in shown}, shown

    events.unlink()
    procs = launch()
    try:
        codes = wait_all(procs, 240)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert codes == [0, 0], logs(codes)
    second = _events(events)
    assert sorted((e["rank"], e["resume"]) for e in second if e["event"] == "start") == \
        [(0, str(out / "checkpoint-6")), (1, str(out / "checkpoint-6"))]
    resumed = [e for e in second if e["event"] == "resume"]
    assert sorted(e["rank"] for e in resumed) == [0, 1]
    for e in resumed:
        assert _state(e) == _state(saved[6]), (e, saved[6])


def test_directory_steps_replace_an_earlier_run_and_name_bad_files(agent, tmp_path):
    cfg = agent.config("dirs")
    d = tmp_path / "checkpoint-3"
    (d / "sub").mkdir(parents=True)
    (d / "model.safetensors").write_bytes(b"x" * 5000)
    (d / "sub" / "empty.json").write_bytes(b"")
    save_directory(cfg, 3, d)
    (d / "model.safetensors").write_bytes(b"y" * 10)  # the same step saved again by a rerun replaces it
    save_directory(cfg, 3, d)
    back = restore_directory(cfg, 3, tmp_path / "r" / "checkpoint-3")
    assert Path(back, "model.safetensors").read_bytes() == b"y" * 10
    assert Path(back, "sub", "empty.json").read_bytes() == b""
    (d / "bad name.bin").write_bytes(b"z")
    with pytest.raises(ValueError, match=r"bad name.bin as object 'bad name.bin' of tierckpt://dirs/4 failed"):
        save_directory(cfg, 4, d)
    assert 4 not in agent.steps("dirs")
    with pytest.raises(FileNotFoundError, match="holds no files"):
        save_directory(cfg, 5, tmp_path / "r" / "nothing")


def test_an_unchanged_trainer_under_tierckpt_sync_resumes_on_a_new_machine(tmp_path):
    """No callback, no agent: `tierckpt sync -- python train.py` mirrors the Trainer's output_dir to a
    remote directory while it trains. Killed between saves, on a machine whose output_dir is gone,
    the next run under sync pulls the checkpoint-N directories back at start and the Trainer's own
    resume_from_checkpoint=True resumes from checkpoint-6 with the state saved there."""
    out, remote, events = tmp_path / "out", tmp_path / "remote", tmp_path / "events.jsonl"
    sync = [tc_agent.find_binary("tierckpt"), "sync", "--local", str(out), "--remote", str(remote),
            "--settle-ms", "200", "--"]
    common = ["--output-dir", str(out), "--events", str(events), "--plain"]
    _run(None, *common, "--kill-step", "7", wrap=sync, expect=128 + signal.SIGKILL)
    saved = {e["step"]: e for e in _events(events) if e["event"] == "save"}
    assert sorted(saved) == [2, 4, 6]
    # .tierckpt-sync/ on the remote: sync's index of the modification times pushed (docs/sync.md)
    assert sorted(p.name for p in remote.iterdir()) == [".tierckpt-sync", "checkpoint-2", "checkpoint-4",
                                                        "checkpoint-6"]

    shutil.rmtree(out)  # a new machine
    events.unlink()
    log = _run(None, *common, wrap=sync)
    second = _events(events)
    assert [s["resume"] for s in second if s["event"] == "start"] == [str(out / "checkpoint-6")]
    (resumed,) = [e for e in second if e["event"] == "resume"]
    assert _state(resumed) == _state(saved[6])
    # save_total_limit=3 rotated the local directories by modification time and sync mirrored the
    # deletions. The pull gave the checkpoint-2/4/6 files and directories the times they had when they
    # were pushed (decision 89), so the rotation deleted the oldest two, and the directory remote keeps
    # no emptied directory.
    kept = sorted(p.name for p in remote.iterdir())
    assert kept == [".tierckpt-sync", "checkpoint-10", "checkpoint-6", "checkpoint-8"], (kept, log[-3000:])


def test_without_transformers_the_import_names_the_pip_command():
    r = subprocess.run([sys.executable, "-c", "import sys; sys.modules['transformers'] = None; import tierckpt.hf"],
                       capture_output=True, text=True, stdin=subprocess.DEVNULL)
    assert r.returncode != 0 and "ImportError: tierckpt.hf needs Hugging Face Transformers" in r.stderr, r.stderr
    assert "pip install 'transformers==5.25.0' 'accelerate==1.16.0'" in r.stderr
