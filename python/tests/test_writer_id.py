"""The writer id every rank of one job presents to its agent (issue 16 item 4:
one writer per step). Ranks derive it from the launch without talking to each
other, so the rule must give every rank of a job the same id and another job,
or a restarted incarnation, another one."""
import pytest

from tierckpt import agent

LAUNCH_VARS = ("TIERCKPT_WRITER_ID", "TORCHELASTIC_RUN_ID", "TORCHELASTIC_RESTART_COUNT", "SLURM_JOB_ID",
               "SLURM_RESTART_COUNT", "MASTER_ADDR", "MASTER_PORT")


@pytest.fixture
def env(monkeypatch):
    for k in LAUNCH_VARS:
        monkeypatch.delenv(k, raising=False)
    return monkeypatch


def test_torchrun_incarnations_are_different_writers(env):
    env.setenv("TORCHELASTIC_RUN_ID", "run-1")
    env.setenv("TORCHELASTIC_RESTART_COUNT", "0")
    env.setenv("MASTER_ADDR", "10.0.0.1")
    env.setenv("MASTER_PORT", "29500")
    first = agent.writer_id()
    env.setenv("TORCHELASTIC_RESTART_COUNT", "1")
    assert agent.writer_id() != first
    assert first == "torchelastic:run-1:0"


def test_slurm_then_master_address_then_anonymous(env):
    assert agent.writer_id() == ""
    env.setenv("MASTER_ADDR", "node-1.cluster")
    env.setenv("MASTER_PORT", "29500")
    assert agent.writer_id() == "job:node-1.cluster:29500"
    env.setenv("SLURM_JOB_ID", "4242")
    assert agent.writer_id() == "slurm:4242:0"
    env.setenv("SLURM_RESTART_COUNT", "2")
    assert agent.writer_id() == "slurm:4242:2"


def test_explicit_id_wins_and_odd_characters_are_replaced(env):
    env.setenv("TORCHELASTIC_RUN_ID", "run with spaces/and*stars" + "x" * 200)
    derived = agent.writer_id()
    assert " " not in derived and "*" not in derived and len(derived) == 128
    env.setenv("TIERCKPT_WRITER_ID", "my-job.7")
    assert agent.writer_id() == "my-job.7"
