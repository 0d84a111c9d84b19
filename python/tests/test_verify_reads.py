"""verify_reads: "always" (default) re-hashes every object a load uses; "attested" skips the hash
of objects the agent verified within attest_max_age seconds (the DCP writer's objects are hashed
by the agent after seal) and hashes the others; False/"never" hashes nothing. Observed through the
client's read counters, with a real agent and dcp.load; bad values are refused naming the choices."""
from __future__ import annotations

import time

import pytest
import torch
import torch.distributed.checkpoint as dcp

from tierckpt import CheckpointConfig
from tierckpt import agent as tc_agent
from tierckpt.torch import TieredReader, TieredWriter


@pytest.fixture(autouse=True)
def clean_env(monkeypatch, tmp_path):
    for name in ("VERIFY_READS", "ATTEST_MAX_AGE", "CONFIG"):
        monkeypatch.delenv(f"TIERCKPT_{name}", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))


def test_verify_reads_takes_three_modes_and_refuses_others(monkeypatch):
    for given, resolved, mode in ((None, True, "always"), (True, True, "always"), ("always", True, "always"),
                                  ("attested", "attested", "attested"), ("ATTESTED", "attested", "attested"),
                                  (False, False, "never"), ("never", False, "never"), ("off", False, "never")):
        c = CheckpointConfig("job", verify_reads=given).resolve()
        assert (c.verify_reads, c.read_verify) == (resolved, mode), given
    assert CheckpointConfig("job").resolve().attest_max_age == 900.0
    assert CheckpointConfig("job", attest_max_age=30).resolve().attest_max_age == 30.0
    with pytest.raises(ValueError, match=r"CheckpointConfig.verify_reads: expected True or 'always'.*'attested'"):
        CheckpointConfig("job", verify_reads="sometimes").resolve()
    with pytest.raises(ValueError, match="CheckpointConfig.attest_max_age"):
        CheckpointConfig("job", attest_max_age=-1).resolve()
    monkeypatch.setenv("TIERCKPT_VERIFY_READS", "attested")
    assert CheckpointConfig("job").resolve().read_verify == "attested"
    monkeypatch.setenv("TIERCKPT_VERIFY_READS", "maybe")
    with pytest.raises(ValueError, match="environment variable TIERCKPT_VERIFY_READS"):
        CheckpointConfig("job").resolve()


def _state(seed: int) -> dict:
    g = torch.Generator().manual_seed(seed)
    return {"w": torch.randn(256, 256, generator=g), "b": torch.randn(4096, generator=g), "step": seed}


def _load(cfg, step: int) -> dict:
    target = {"w": torch.zeros(256, 256), "b": torch.zeros(4096), "step": 0}
    dcp.load(target, storage_reader=TieredReader(cfg, step), no_dist=True)
    return target


def _counters(cfg) -> dict:
    return dict(tc_agent.client(cfg.resolve()).read_counters)


def test_attested_dcp_load_skips_the_hash_when_fresh_and_hashes_when_stale(agent):
    base = agent.config("attest")
    dcp.save(_state(3), storage_writer=TieredWriter(base, 1), no_dist=True)
    expected = _state(3)

    before = _counters(base)
    got = _load(agent.config("attest", verify_reads="attested"), 1)
    after = _counters(base)
    assert torch.equal(got["w"], expected["w"]) and torch.equal(got["b"], expected["b"]) and got["step"] == 3
    assert after["attested"] > before["attested"], (before, after)
    # Only .metadata is hashed: the writer seals it with its own checksum (write_object), which the
    # agent records without hashing, so it was never verified by the agent.
    assert after["hashed"] == before["hashed"] + 1, (before, after)
    tc_agent.client(base.resolve()).verify("attest", 1)  # the agent hashes every object: all verified now
    before = _counters(base)
    _load(agent.config("attest", verify_reads="attested"), 1)
    after = _counters(base)
    assert after["hashed"] == before["hashed"] and after["attested"] > before["attested"], (before, after)

    _load(agent.config("attest"), 1)  # the default: always
    always = _counters(base)
    assert always["hashed"] > after["hashed"] and always["attested"] == after["attested"]

    time.sleep(0.05)  # older than the limit below: hashed again
    got = _load(agent.config("attest", verify_reads="attested", attest_max_age=0.01), 1)
    stale = _counters(base)
    assert torch.equal(got["w"], expected["w"])
    assert stale["hashed"] > always["hashed"] and stale["attested"] == always["attested"], (always, stale)

    _load(agent.config("attest", verify_reads=False), 1)
    never = _counters(base)
    assert never["unverified"] > stale["unverified"] and never["hashed"] == stale["hashed"]
