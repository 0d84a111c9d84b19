"""The GPU path's CPU-side half (tierckpt/torch/_cuda.py, decisions 114-115), without a GPU.

1. A CPU-only state through every front (Checkpointer, DCP blocking save, async_save, both staging
   paths, loads) never enters the CUDA path: torch.cuda's entry points are replaced by tripwires,
   torch.cuda.is_initialized() stays False and no registry is created.
2. HostRegistry's life cycle (register once per mapping, unregister a mapping that went or whose
   address now maps another file, the fallback when registration fails, the registered alias a
   load copies from) against a FAKE cudart (it records calls; no CUDA is involved) over real
   /dev/shm mappings and the real /proc/self/maps, or a fake maps file where a kernel race would
   be needed. The real cudart and the copies themselves run in bench/gpu/cuda_roundtrip.py.
"""
from __future__ import annotations

import ctypes
import logging
import mmap
import os

import pytest
import torch
import torch.distributed.checkpoint as dcp

from tierckpt.torch import Checkpointer, TieredReader, TieredWriter
from tierckpt.torch import _cuda


class FakeCudart:
    """A fake of torch.cuda.cudart(): records register/unregister calls, returns fail_with or 0."""

    def __init__(self, fail_with: int = 0) -> None:
        self.fail_with = fail_with
        self.registered: dict[int, int] = {}
        self.calls: list[tuple] = []

    def cudaHostRegister(self, ptr, size, flags):
        self.calls.append(("register", ptr, size, flags))
        if self.fail_with:
            return self.fail_with
        assert ptr not in self.registered, "registered twice without unregistering (cudaErrorHostMemoryAlreadyRegistered)"
        self.registered[ptr] = size
        return 0

    def cudaHostUnregister(self, ptr):
        self.calls.append(("unregister", ptr))
        return 0 if self.registered.pop(ptr, None) is not None else 713  # cudaErrorHostMemoryNotRegistered


def _shm_mapping(tmp, name: str, size: int, access=mmap.ACCESS_WRITE):
    path = os.path.join(tmp, name)
    with open(path, "wb") as f:
        f.truncate(size)
    fd = os.open(path, os.O_RDWR if access == mmap.ACCESS_WRITE else os.O_RDONLY)
    m = mmap.mmap(fd, size, access=access)
    os.close(fd)
    return path, m


def _addr(m: mmap.mmap) -> int:
    return ctypes.addressof(ctypes.c_char.from_buffer(m)) if not m.closed else 0


@pytest.fixture
def shm(tmp_path):
    d = "/dev/shm" if os.path.isdir("/dev/shm") else str(tmp_path)
    sub = os.path.join(d, f"tierckpt-cuda-test-{os.getpid()}")
    os.makedirs(sub, exist_ok=True)
    yield sub
    for f in os.listdir(sub):
        os.unlink(os.path.join(sub, f))
    os.rmdir(sub)


# ---- 1. a CPU-only state never touches CUDA ----

@pytest.fixture
def cuda_tripwires(monkeypatch):
    """torch.cuda's entry points raise; the module-level registry must stay unmade."""
    def trip(name):
        def fn(*a, **k):
            raise AssertionError(f"torch.cuda.{name} called while saving/loading a CPU-only state")
        return fn
    for name in ("cudart", "current_stream", "Stream", "Event", "synchronize", "init", "current_device",
                 "_lazy_init", "stream"):
        monkeypatch.setattr(torch.cuda, name, trip(name))
    monkeypatch.setattr(_cuda, "_registry", None)
    yield
    assert _cuda._registry is None, "a CPU-only save or load created the CUDA registry"


def _cpu_state(seed: int) -> dict:
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(64, 32, generator=g)
    return {"w": w, "wt": w.t(),  # non-contiguous: copied through torch, not copy_in
            "b": torch.randn(32, generator=g).to(torch.bfloat16), "step": seed}


def _zeros(sd: dict) -> dict:
    return {k: torch.zeros_like(v) if isinstance(v, torch.Tensor) else None for k, v in sd.items()}


def _same(a: dict, b: dict) -> None:
    for k, v in a.items():
        if isinstance(v, torch.Tensor):
            assert torch.equal(v, b[k]), k
        else:
            assert v == b[k], k


def test_a_cpu_only_state_never_initializes_cuda(agent, cuda_tripwires):
    ck = Checkpointer(agent.config("cpu-ck"))
    for step in (1, 2):
        ck.save(step, _cpu_state(step))
    got = _zeros(_cpu_state(0))
    ck.load(got, 2)
    _same(_cpu_state(2), got)

    for files, ns in ((1, "cpu-dcp1"), (2, "cpu-dcp2")):  # the flat layout, and the planner's pieces
        cfg = agent.config(ns, files_per_rank=files)
        dcp.save(_cpu_state(3), storage_writer=TieredWriter(cfg, 1), no_dist=True)
        dcp.async_save(_cpu_state(4), storage_writer=TieredWriter(cfg, 2), no_dist=True).result()
        for step, seed in ((1, 3), (2, 4)):
            got = _zeros(_cpu_state(0))
            dcp.load(got, storage_reader=TieredReader(cfg, step), no_dist=True)
            _same(_cpu_state(seed), got)
    assert not torch.cuda.is_initialized()


# ---- 2. HostRegistry against a FAKE cudart ----

def test_a_mapping_is_registered_once_and_unregistered_when_it_goes(shm):
    rt = FakeCudart()
    reg = _cuda.HostRegistry(cudart=rt)
    _, a = _shm_mapping(shm, "a", 1 << 20)
    pa = _addr(a)
    assert reg.ensure(pa, 1 << 20)
    assert reg.ensure(pa, 1 << 20)  # the next save into the kept mapping: nothing to do
    assert reg.ensure(pa, (1 << 20) - 100)  # a shorter object in the same recycled segment: nothing either
    assert reg.ensure(pa + 4096, 100)
    assert [c[0] for c in rt.calls] == ["register"]
    assert rt.calls[0][1:3] == (pa, 1 << 20), "not the whole mapping registered"
    assert rt.calls[0][3] == _cuda.HOST_REGISTER_PORTABLE | _cuda.HOST_REGISTER_MAPPED
    s = reg.stats()
    assert (s["registrations"], s["registered_bytes"], s["live"]) == (1, 1 << 20, 1) and s["register_seconds"] >= 0
    _, b = _shm_mapping(shm, "b", 1 << 20)  # mapped while a still is: another address
    a.close()  # the client unmapped a (evicted, or its file was deleted)
    assert reg.ensure(_addr(b), 1 << 20)
    assert ("unregister", pa) in rt.calls, "the unmapped range stayed registered (its pages stay locked)"
    assert list(rt.registered) == [_addr(b)]
    reg.clear()
    assert rt.registered == {} and reg.stats()["unregistrations"] == 2
    b.close()


def test_another_file_at_the_same_address_is_registered_anew(tmp_path):
    rt = FakeCudart()
    maps = tmp_path / "maps"
    line = "7f0000000000-7f0000100000 rw-s 00000000 00:1a {ino}  /dev/shm/seg\n"
    maps.write_text(line.format(ino=111))
    reg = _cuda.HostRegistry(cudart=rt, maps=str(maps))
    ptr = 0x7F0000000000
    assert reg.ensure(ptr, 1 << 20)
    maps.write_text(line.format(ino=222))  # unmapped, and another segment mapped at the same address
    assert reg.ensure(ptr, 1 << 20)
    assert [c[0] for c in rt.calls] == ["register", "unregister", "register"]
    maps.write_text(line.format(ino=222))
    assert reg.ensure(ptr, 1 << 20) and len(rt.calls) == 3
    # Not one mapping (unmapped; past its end): copied unregistered, nothing registered, one warning.
    assert not reg.ensure(0x1000, 4096)
    assert not reg.ensure(ptr, (1 << 20) + 1)
    assert len(rt.calls) == 3 and reg.stats()["unregistered_copies"] == 2


def test_a_failed_registration_falls_back_once_with_one_warning(shm, caplog):
    rt = FakeCudart(fail_with=2)  # cudaErrorMemoryAllocation, as under a small ulimit -l
    reg = _cuda.HostRegistry(cudart=rt)
    _, a = _shm_mapping(shm, "a", 1 << 16)
    with caplog.at_level(logging.WARNING, logger="tierckpt"):
        assert not reg.ensure(_addr(a), 1 << 16)
        assert not reg.ensure(_addr(a), 1 << 16)
    warnings = [r for r in caplog.records if "cudaHostRegister" in r.getMessage()]
    assert len(warnings) == 1 and "ulimit -l" in warnings[0].getMessage()
    assert len(rt.calls) == 1, "registration was tried again after it failed"
    s = reg.stats()
    assert s["registrations"] == 0 and s["unregistered_copies"] == 2 and "error 2" in s["failed"]

    class NoBindings:  # a torch whose cudart lacks cudaHostRegister
        pass
    reg = _cuda.HostRegistry(cudart=NoBindings())
    assert not reg.ensure(_addr(a), 1 << 16) and "could not be called (AttributeError" in reg.stats()["failed"]
    a.close()


def test_a_load_copies_from_the_registered_mapping_of_the_same_file(shm):
    rt = FakeCudart()
    reg = _cuda.HostRegistry(cudart=rt)
    size = 1 << 20
    path, w = _shm_mapping(shm, "seg", size)
    w[4096 * 3:4096 * 3 + 5] = b"hello"
    assert reg.ensure(_addr(w), size)
    fd = os.open(path, os.O_RDONLY)
    r = mmap.mmap(fd, size, access=mmap.ACCESS_READ)  # the reader's own read-only mapping
    os.close(fd)
    view = torch.frombuffer(r, dtype=torch.uint8)
    at = reg.alias(view.data_ptr() + 4096 * 3, 5)
    assert at == _addr(w) + 4096 * 3
    assert ctypes.string_at(at, 5) == b"hello"
    assert reg.stats()["registered_loads"] == 1
    assert reg.alias(view.data_ptr() + size - 4, 8) is None  # past the registered range
    _, other = _shm_mapping(shm, "other", size)
    assert reg.alias(_addr(other), 16) is None  # a file nobody registered: copied unregistered
    del view
    r.close()
    reg.clear()
    w.close()
    other.close()


def test_no_registry_means_no_alias_and_no_cuda(cuda_tripwires):
    assert _cuda.device_source(torch.zeros(8, dtype=torch.uint8)) is None
    _cuda.synchronize([torch.zeros(1)])  # CPU targets: nothing to wait for, no CUDA call
    assert not torch.cuda.is_initialized()
