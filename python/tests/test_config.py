"""CheckpointConfig: arguments win over environment variables, which win over the
config file, which wins over defaults; bad values are named with their source."""
from __future__ import annotations

import pickle

import pytest

from tierckpt import CheckpointConfig


@pytest.fixture(autouse=True)
def clean_env(monkeypatch, tmp_path):
    for name in ("NAMESPACE", "SOCKET", "DURABLE", "KEEP_LAST", "PERSIST_EVERY", "CONFIG", "AUTO_START",
                 "MEMORY_BUDGET", "ROOT", "VERIFY_READS", "FILES_PER_RANK"):
        monkeypatch.delenv(f"TIERCKPT_{name}", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))  # no user config file


def test_defaults():
    c = CheckpointConfig("job").resolve()
    assert (c.namespace, c.persist_every, c.auto_start, c.files_per_rank, c.verify_reads) == ("job", 0, True, 1, True)
    assert c.socket is None and c.durable is None and c.keep_last is None and c.start_timeout_s == 30.0
    assert c.explicit >= {"namespace"} and "durable" not in c.explicit


def test_argument_beats_environment_beats_file(monkeypatch, tmp_path):
    cfg_file = tmp_path / "tierckpt.toml"
    cfg_file.write_text('durable = "/from/file"\nkeep_last = 7\npersist_every = 5\nsocket = "/file.sock"\n'
                        'namespace = "file-ns"\n')
    monkeypatch.setenv("TIERCKPT_CONFIG", str(cfg_file))
    monkeypatch.setenv("TIERCKPT_PERSIST_EVERY", "10")
    monkeypatch.setenv("TIERCKPT_SOCKET", "/env.sock")
    c = CheckpointConfig(socket="/arg.sock").resolve()
    assert c.socket == "/arg.sock"          # argument
    assert c.persist_every == 10            # environment
    assert c.keep_last == 7                 # file
    assert c.durable == "/from/file" and c.namespace == "file-ns"
    assert c.auto_start is True             # default
    assert c.explicit >= {"socket"} and "durable" not in c.explicit
    # Where each value came from, in resolve()'s words (a failed embedded start names them).
    assert c.source("socket") == "CheckpointConfig.socket"
    assert c.source("persist_every") == "environment variable TIERCKPT_PERSIST_EVERY"
    assert c.source("keep_last") == f"{cfg_file}: key keep_last"
    assert c.source("auto_start") is None
    assert pickle.loads(pickle.dumps(c)).source("keep_last") == f"{cfg_file}: key keep_last"


def test_default_config_file_location(monkeypatch, tmp_path):
    path = tmp_path / "xdg" / "tierckpt" / "config.toml"
    path.parent.mkdir(parents=True)
    path.write_text("auto_start = false\n")
    assert CheckpointConfig("job").resolve().auto_start is False


def test_bad_values_name_their_source(monkeypatch, tmp_path):
    with pytest.raises(ValueError, match='namespace "a/b"'):
        CheckpointConfig("a/b").resolve()
    with pytest.raises(ValueError, match="needs a namespace"):
        CheckpointConfig().resolve()
    monkeypatch.setenv("TIERCKPT_KEEP_LAST", "zero")
    with pytest.raises(ValueError, match="environment variable TIERCKPT_KEEP_LAST"):
        CheckpointConfig("job").resolve()
    monkeypatch.delenv("TIERCKPT_KEEP_LAST")
    with pytest.raises(ValueError, match="CheckpointConfig.persist_every: expected an integer >= 0"):
        CheckpointConfig("job", persist_every=-1).resolve()
    bad = tmp_path / "bad.toml"
    bad.write_text("kep_last = 3\n")
    monkeypatch.setenv("TIERCKPT_CONFIG", str(bad))
    with pytest.raises(ValueError, match="unknown key.*kep_last"):
        CheckpointConfig("job").resolve()
    bad.write_text("keep_last = [\n")
    with pytest.raises(ValueError, match="not valid TOML"):
        CheckpointConfig("job").resolve()
    monkeypatch.setenv("TIERCKPT_CONFIG", str(tmp_path / "missing.toml"))
    with pytest.raises(FileNotFoundError, match="missing.toml"):
        CheckpointConfig("job").resolve()


def test_world_size_is_argument_only(monkeypatch, tmp_path):
    bad = tmp_path / "w.toml"
    bad.write_text("world_size = 4\n")
    monkeypatch.setenv("TIERCKPT_CONFIG", str(bad))
    with pytest.raises(ValueError, match="unknown key"):
        CheckpointConfig("job").resolve()
    monkeypatch.delenv("TIERCKPT_CONFIG")
    assert CheckpointConfig("job", world_size=4).resolve().world_size == 4


def test_resolved_config_is_frozen_picklable_and_stable(monkeypatch):
    c = CheckpointConfig("job", persist_every=2).resolve()
    monkeypatch.setenv("TIERCKPT_PERSIST_EVERY", "9")
    assert c.resolve() is c and c.persist_every == 2  # resolution happens once
    assert pickle.loads(pickle.dumps(c)) == c
    with pytest.raises(Exception):
        c.namespace = "other"
