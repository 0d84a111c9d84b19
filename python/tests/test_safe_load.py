"""A restore does not run code a step names (docs/security.md, "Trust of durable bases"; decision 75).

A step's .metadata is unpickled with DCP's own classes allowed only (_safe_unpickle.py), through
TieredReader (dcp.load) and the Checkpointer; the Checkpointer's Python values load with
torch.load(weights_only=True) unless the caller opts out. Each malicious pickle here would create a
marker file if it ran; the tests check that it was refused, with an error naming the step and the
global, and that the marker is not there."""
from __future__ import annotations

import logging
import os
import pickle

import numpy as np
import pytest
import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint import FileSystemWriter
from torch.distributed.checkpoint.metadata import Metadata

from tierckpt import _tierckpt
from tierckpt.torch import Checkpointer, TieredReader, TieredWriter
from tierckpt.torch._dcp_compat import load_keeps_read_metadata_errors
from tierckpt.torch._safe_unpickle import ForbiddenGlobalError, load_metadata


class _Payload:
    """Unpickles to os.system(command): a marker file appears if a load runs it."""

    def __init__(self, marker) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


class _Opaque:
    """A class of the test's own: plain pickle loads it, the weights-only unpickler does not."""

    def __init__(self, x: int) -> None:
        self.x = x

    def __eq__(self, other) -> bool:
        return isinstance(other, _Opaque) and other.x == self.x


def _stock_metadata(tmp_path) -> bytes:
    """The .metadata FileSystemWriter writes (pickle protocol 4, a PosixPath checkpoint_id)."""
    state = {"w": torch.randn(3, 4), "b": torch.ones(2, dtype=torch.bfloat16), "n": 7,
             "cl": torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last), "cfg": {"tags": ("a", "b")}}
    dcp.save(state, storage_writer=FileSystemWriter(str(tmp_path / "stock")), no_dist=True)
    return (tmp_path / "stock" / ".metadata").read_bytes()


def _commit_raw_step(agent, ns: str, step: int, metadata: bytes) -> None:
    """A step whose .metadata is the given bytes, as a party who can write the durable base would leave it."""
    c = _tierckpt.Client.connect(agent.socket, client_name="pytest")
    c.begin_step(ns, step)
    c.write_object(ns, step, "__0_0.distcp", b"\0" * 64)
    c.write_object(ns, step, ".metadata", metadata)
    c.commit(ns, step, world_size=1)


def test_stock_dcp_metadata_loads_as_plain_pickle_does_in_every_protocol(tmp_path):
    raw = _stock_metadata(tmp_path)
    plain = pickle.loads(raw)
    assert isinstance(plain, Metadata)
    for protocol in range(2, pickle.HIGHEST_PROTOCOL + 1):
        assert load_metadata(pickle.dumps(plain, protocol=protocol), "x/.metadata") == plain, protocol


@pytest.mark.parametrize("protocol", range(0, pickle.HIGHEST_PROTOCOL + 1))
def test_a_metadata_pickle_naming_os_system_is_refused_and_does_not_run(tmp_path, protocol):
    marker = tmp_path / "ran"
    with pytest.raises(ForbiddenGlobalError, match=r"tierckpt://ns/3/\.metadata: refused .* names posix\.system"):
        load_metadata(pickle.dumps(_Payload(marker), protocol=protocol), "tierckpt://ns/3/.metadata")
    assert not marker.exists()


def test_a_payload_inside_real_metadata_is_refused_where_it_appears(tmp_path):
    marker = tmp_path / "ran"
    metadata = pickle.loads(_stock_metadata(tmp_path))
    metadata.planner_data = {"w": _Payload(marker)}
    with pytest.raises(ForbiddenGlobalError, match="posix.system"):
        load_metadata(pickle.dumps(metadata), "x/.metadata")
    assert not marker.exists()


class _EnumByGetattr:
    """Pickles as Python 3.11.0-3.11.4 pickle an Enum member: getattr(EnumClass, name)."""

    def __init__(self, owner, name) -> None:
        self.owner, self.name = owner, name

    def __reduce__(self):
        return (getattr, (self.owner, self.name))


def test_metadata_written_by_python_3_11_2_loads(tmp_path):
    """Debian 12's python3 (3.11.2) pickles the metadata's _MEM_FORMAT_ENCODING members with
    builtins.getattr; the restricted unpickler refused every step it wrote ("it names
    builtins.getattr"). Rebuilt here by pickling each member the way 3.11.2 does."""
    from torch.distributed.checkpoint.metadata import _MEM_FORMAT_ENCODING, TensorProperties

    metadata = pickle.loads(_stock_metadata(tmp_path))
    for member in _MEM_FORMAT_ENCODING:
        metadata.planner_data = {"fmt": _EnumByGetattr(_MEM_FORMAT_ENCODING, member.name)}
        raw = pickle.dumps(metadata, protocol=4)
        assert b"getattr" in raw
        assert load_metadata(raw, "x/.metadata").planner_data == {"fmt": member}
    props = TensorProperties(dtype=torch.float32)
    assert load_metadata(pickle.dumps(metadata), "x/.metadata").planner_data  # by value, as before
    assert props.memory_format == torch.contiguous_format


def test_a_metadata_with_getattr_members_is_freed_without_the_cyclic_collector(tmp_path):
    """The unpickler keeps what builtins.getattr resolved to in its memo; when that held the unpickler
    (a bound method), the two made a cycle, which Python 3.11.2's Unpickler hides from the
    collector: every load of a step written by 3.11.0-3.11.4 kept its whole Metadata alive for good,
    and a failed DCP load left the collector paused (_gc_pause.py) on Debian 12's python3. With the
    collector off, the Metadata must go when its last reference does."""
    import gc
    import weakref

    from torch.distributed.checkpoint.metadata import _MEM_FORMAT_ENCODING

    metadata = pickle.loads(_stock_metadata(tmp_path))
    metadata.planner_data = {"fmt": _EnumByGetattr(_MEM_FORMAT_ENCODING, "TORCH_CONTIGUOUS_FORMAT")}
    raw = pickle.dumps(metadata, protocol=4)
    was = gc.isenabled()
    gc.disable()
    try:
        loaded = load_metadata(raw, "x/.metadata")
        assert loaded.planner_data == {"fmt": _MEM_FORMAT_ENCODING.TORCH_CONTIGUOUS_FORMAT}
        alive = weakref.ref(loaded)
        del loaded
        assert alive() is None, "the loaded Metadata outlived its last reference: a reference cycle holds it"
    finally:
        if was:
            gc.enable()


@pytest.mark.parametrize("owner,name", [
    ("torch.Size", "__class__"),                 # an allowed class, not an Enum
    ("_MEM_FORMAT_ENCODING", "__class__"),       # an allowed Enum, not a member
    ("_MEM_FORMAT_ENCODING", "_value2member_map_"),
])
def test_getattr_reaches_nothing_but_members_of_allowed_enums(tmp_path, owner, name):
    from torch.distributed.checkpoint.metadata import _MEM_FORMAT_ENCODING

    cls = {"torch.Size": torch.Size, "_MEM_FORMAT_ENCODING": _MEM_FORMAT_ENCODING}[owner]
    with pytest.raises(ForbiddenGlobalError, match="builtins.getattr"):
        load_metadata(pickle.dumps(_EnumByGetattr(cls, name), protocol=4), "x/.metadata")


def test_getattr_on_an_enum_that_is_not_allowed_is_refused(tmp_path):
    import signal

    with pytest.raises(ForbiddenGlobalError, match="names signal.Signals"):
        load_metadata(pickle.dumps(_EnumByGetattr(signal.Signals, "SIGKILL"), protocol=4), "x/.metadata")


def test_a_class_the_user_allows_with_add_safe_globals_is_loaded(tmp_path):
    metadata = pickle.loads(_stock_metadata(tmp_path))
    metadata.planner_data = {"w": _Opaque(3)}
    raw = pickle.dumps(metadata)
    with pytest.raises(ForbiddenGlobalError, match=r"add_safe_globals\(\[\S*_Opaque\]\)"):
        load_metadata(raw, "x/.metadata")
    with torch.serialization.safe_globals([_Opaque]):
        assert load_metadata(raw, "x/.metadata").planner_data == {"w": _Opaque(3)}


def test_tiered_reader_refuses_a_step_whose_metadata_names_os_system(agent, tmp_path, caplog):
    marker = tmp_path / "ran"
    cfg = agent.config("evil1")
    _commit_raw_step(agent, "evil1", 5, pickle.dumps(_Payload(marker)))
    with pytest.raises(ForbiddenGlobalError, match=r"tierckpt://evil1/5/\.metadata: refused .* posix\.system"):
        TieredReader(cfg).read_metadata()  # the newest step: the error names it, not "latest"
    # dcp.load wraps it in a CheckpointException; torch 2.9's drops it for a bare AssertionError, and
    # the reader logs it there.
    keeps = load_keeps_read_metadata_errors()
    with caplog.at_level(logging.ERROR, logger="tierckpt"):
        with pytest.raises(BaseException, match="posix.system" if keeps else "AssertionError"):
            dcp.load({"w": torch.zeros(4)}, storage_reader=TieredReader(cfg, 5), no_dist=True)
    if not keeps:
        assert any("posix.system" in r.getMessage() for r in caplog.records), [r.getMessage() for r in caplog.records]
    assert not marker.exists()


def test_checkpointer_refuses_a_step_whose_metadata_names_os_system(agent, tmp_path):
    marker = tmp_path / "ran"
    cfg = agent.config("evil2")
    _commit_raw_step(agent, "evil2", 6, pickle.dumps(_Payload(marker)))
    for weights_only in (True, False):  # weights_only is about the values; .metadata is always restricted
        with pytest.raises(ForbiddenGlobalError, match=r"tierckpt://evil2/6/\.metadata: refused .* posix\.system"):
            Checkpointer(cfg).load({"w": torch.zeros(4)}, step=6, weights_only=weights_only)
    assert not marker.exists()


def test_checkpointer_loads_plain_values_and_refuses_others_unless_trusted(agent, tmp_path):
    marker = tmp_path / "ran"
    cfg = agent.config("vals")
    plain = {"w": torch.arange(4.0), "step": 9, "lr": 0.5, "betas": (0.9, 0.99), "name": "run", "none": None,
             "ids": [1, 2], "set": {3}, "size": torch.Size([2, 3]), "dtype": torch.bfloat16}
    Checkpointer(cfg).save(1, plain)
    got = {k: (torch.zeros(4) if k == "w" else None) for k in plain}
    assert Checkpointer(cfg).load(got, step=1) == 1  # a fresh Checkpointer: .metadata and values unpickled
    for k, v in plain.items():
        assert torch.equal(got[k], v) if k == "w" else got[k] == v, k

    Checkpointer(cfg).save(2, {"w": torch.ones(4), "np": np.arange(3)})
    target = {"w": torch.zeros(4), "np": None}
    with pytest.raises(pickle.UnpicklingError, match=r"tierckpt://vals/2: the value 'np' .*weights_only=False"):
        Checkpointer(cfg).load(target, step=2)
    Checkpointer(cfg).load(target, step=2, weights_only=False)
    assert torch.equal(target["w"], torch.ones(4)) and list(target["np"]) == [0, 1, 2]

    Checkpointer(cfg).save(3, {"w": torch.ones(4), "evil": _Payload(marker)})  # pickled, not run, by the save
    with pytest.raises(pickle.UnpicklingError, match=r"tierckpt://vals/3: the value 'evil' .*posix\.system"):
        Checkpointer(cfg).load({"w": torch.zeros(4), "evil": None}, step=3)
    assert not marker.exists()


def test_a_dcp_save_through_tiered_writer_loads_through_the_restricted_unpickler(agent):
    cfg = agent.config("dcpok")
    state = {"w": torch.randn(5, 3), "n": 4, "cfg": {"tags": ("a",)}}
    dcp.save(state, storage_writer=TieredWriter(cfg, 1), no_dist=True)
    metadata = TieredReader(cfg, 1).read_metadata()
    assert isinstance(metadata, Metadata) and set(metadata.state_dict_metadata) >= {"w", "n"}
    target = {"w": torch.zeros(5, 3), "n": 0, "cfg": {"tags": ()}}
    dcp.load(target, storage_reader=TieredReader(cfg, 1), no_dist=True)
    assert torch.equal(target["w"], state["w"]) and target["n"] == 4 and target["cfg"] == {"tags": ("a",)}
