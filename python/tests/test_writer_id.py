"""The writer id every rank of one job presents to its agent (issue 16 item 4:
one writer per step). Ranks derive it from the launch without talking to each
other, so the rule must give every rank of a job the same id and another job,
or a restarted incarnation, another one; and a process a rank starts later
(DCP's async PROCESS executor, which sets its own MASTER_PORT) must keep it."""
import os
import subprocess
import sys

import pytest

from tierckpt import agent


def test_torchrun_incarnations_are_different_writers():
    env = {"TORCHELASTIC_RUN_ID": "run-1", "TORCHELASTIC_RESTART_COUNT": "0", "MASTER_ADDR": "10.0.0.1",
           "MASTER_PORT": "29500"}
    first = agent.derive_writer_id(env)
    assert first == "torchelastic:run-1:0"
    assert agent.derive_writer_id({**env, "TORCHELASTIC_RESTART_COUNT": "1"}) != first


def test_slurm_then_master_address_then_anonymous():
    assert agent.derive_writer_id({}) == ""
    env = {"MASTER_ADDR": "node-1.cluster", "MASTER_PORT": "29500"}
    assert agent.derive_writer_id(env) == "job:node-1.cluster:29500"
    env["SLURM_JOB_ID"] = "4242"
    assert agent.derive_writer_id(env) == "slurm:4242:0"
    env["SLURM_RESTART_COUNT"] = "2"
    assert agent.derive_writer_id(env) == "slurm:4242:2"


def test_odd_characters_are_replaced_and_the_length_bounded():
    derived = agent.derive_writer_id({"TORCHELASTIC_RUN_ID": "run with spaces/and*stars" + "x" * 200})
    assert " " not in derived and "*" not in derived and len(derived) == 128


@pytest.fixture
def clean_env(monkeypatch):
    # setenv first so that undo removes what writer_id() pins.
    for k in ("TIERCKPT_WRITER_ID", "TORCHELASTIC_RUN_ID", "SLURM_JOB_ID", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.setenv(k, "x")
        monkeypatch.delenv(k)
    return monkeypatch


def test_the_id_is_pinned_for_processes_started_later(clean_env):
    clean_env.setenv("MASTER_ADDR", "10.0.0.1")
    clean_env.setenv("MASTER_PORT", "29500")
    assert agent.writer_id() == "job:10.0.0.1:29500"
    assert os.environ["TIERCKPT_WRITER_ID"] == "job:10.0.0.1:29500"
    # A child that moves to another port (DCP's PROCESS executor does) keeps the parent's id.
    child = subprocess.run([sys.executable, "-c", "import os; os.environ['MASTER_PORT'] = '40000'; "
                            "from tierckpt import agent; print(agent.writer_id())"],
                           capture_output=True, text=True, check=True)
    assert child.stdout.strip() == "job:10.0.0.1:29500"
    clean_env.setenv("TIERCKPT_WRITER_ID", "my-job.7")
    assert agent.writer_id() == "my-job.7"
