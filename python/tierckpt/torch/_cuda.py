"""The GPU path: CUDA tensors copied into and out of the agent's shared memory at the PCIe limit.

A device-to-host copy into a shared-memory mapping runs at the pinned limit only once the mapping
is registered with CUDA (``cudaHostRegister``); unregistered it is 4x slower to save and 8x slower
to load (docs/benchmarks.md). Registration is slow (seconds for GiBs), so it is paid once per
mapping and kept: the client keeps its mappings of recycled segments across saves
(src/client/mapping_cache.h), so from the save that reuses a segment on, nothing is registered.

Contract (decisions 114, 115):
- Nothing here touches CUDA unless a tensor being copied is on CUDA: a CPU-only state never
  imports torch's CUDA runtime nor initializes CUDA (``torch.cuda.is_initialized()`` stays False).
- Save: ``to_host(obj, pairs)`` registers the object's mapping once, enqueues every copy with
  ``copy_(non_blocking=True)`` on a side stream that first waits for the caller's current stream
  (so the copies see every kernel the caller enqueued before the save), records an event, and
  returns a ``HostCopies``; its ``wait()`` blocks until the copies are done. The writers wait
  before they seal the object: the agent hashes and commits only bytes that are all there. So a
  save returns once its copies are done, and the caller may change its tensors right after.
- Load: ``device_source(view_data)`` gives a tensor over a registered mapping of the same file
  (the writer's kept mapping), when this process registered one; the copies into CUDA tensors
  run ``non_blocking`` on the current stream and ``synchronize()`` waits for them before the
  reader checks that the file was not recycled under the copy. A file this process never
  registered (a restore in a new process) is copied unregistered: registering it would cost more
  than the copy saves.
- Fallback: when registration fails (``ulimit -l``, a driver without host registration), one
  warning is logged and every later copy takes the unregistered path (still correct, slower).
- Life cycle: a registration covers a whole mapping, keyed by its address, length and file
  (device, inode);
  before each registering save the registry reads /proc/self/maps and unregisters every entry
  whose address no longer maps its file (the client unmapped it, or mapped another file there).
  ``stats()`` reports registrations and their time apart from the saves (the bench reads it).

Thread-safe: one lock guards the registry.
"""
from __future__ import annotations

import ctypes
import logging
import threading
import time
from dataclasses import dataclass

import torch

__all__ = ["HostCopies", "HostRegistry", "device_source", "registry", "stats", "synchronize", "to_host"]

log = logging.getLogger("tierckpt")

# cudaHostRegister flags (cuda_runtime_api.h): portable to every context, mapped into the device's
# address space (the default under UVA; named for older drivers).
HOST_REGISTER_PORTABLE = 0x01
HOST_REGISTER_MAPPED = 0x02


@dataclass(frozen=True)
class _Vma:
    start: int
    end: int
    pgoff: int
    file: tuple[int, int]  # (device, inode); (0, 0) for anonymous memory


def _read_maps(path: str = "/proc/self/maps") -> list[_Vma]:
    out = []
    with open(path, encoding="ascii", errors="replace") as f:
        for line in f:
            parts = line.split(None, 5)
            if len(parts) < 5:
                continue
            lo, hi = parts[0].split("-")
            major, minor = parts[3].split(":")
            out.append(_Vma(int(lo, 16), int(hi, 16), int(parts[2], 16),
                            ((int(major, 16) << 32) | int(minor, 16), int(parts[4]))))
    return out


def _vma_of(vmas: list[_Vma], addr: int) -> _Vma | None:
    for v in vmas:
        if v.start <= addr < v.end:
            return v
    return None


@dataclass
class _Entry:
    ptr: int
    size: int
    file: tuple[int, int]
    file_offset: int  # the file offset at ptr


class HostRegistry:
    """The mappings this process registered with CUDA, their life cycle and the time it took.

    cudart: an object with cudaHostRegister(ptr, size, flags) and cudaHostUnregister(ptr), each
    returning a CUDA error code (0 = success); None = torch.cuda.cudart(), loaded on first use.
    maps: where the process's mappings are read (tests pass a fake file).
    """

    def __init__(self, cudart=None, maps: str = "/proc/self/maps") -> None:
        self._cudart = cudart
        self._maps = maps
        self._mu = threading.Lock()
        self._entries: dict[int, _Entry] = {}  # by ptr
        self._failed: str | None = None  # why registration is off for this process
        self._odd_warned = False
        self.registrations = 0
        self.registered_bytes = 0
        self.register_seconds = 0.0
        self.unregistrations = 0
        self.unregistered_copies = 0
        self.registered_loads = 0  # objects loaded through a registered mapping (alias found)

    def _rt(self):
        if self._cudart is None:
            self._cudart = torch.cuda.cudart()
        return self._cudart

    def ensure(self, ptr: int, size: int) -> bool:
        """Registers the whole mapping holding [ptr, ptr + size) unless it already is (same address,
        length and file); whether it is registered now. The whole mapping, not the object's range:
        the next object in a recycled segment may be a few bytes longer or shorter."""
        if size <= 0:
            return False
        with self._mu:
            if self._failed is not None:
                self.unregistered_copies += 1
                return False
            vmas = _read_maps(self._maps)
            self._sweep(vmas)
            vma = _vma_of(vmas, ptr)
            if vma is None or ptr + size > vma.end:
                # Not one mapping of a file as the client makes them: copy unregistered (correct, slower).
                if not self._odd_warned:
                    self._odd_warned = True
                    log.warning("tierckpt: the %d bytes at %#x are not one mapping of this process; copying CUDA "
                                "tensors into them unregistered (slower). Please report this with /proc/self/maps",
                                size, ptr)
                self.unregistered_copies += 1
                return False
            ptr, size = vma.start, vma.end - vma.start
            e = self._entries.get(ptr)
            if e is not None and e.size == size and e.file == vma.file:
                return True
            if e is not None:  # another length or file at the same address: drop the old registration
                self._unregister(e)
            t0 = time.perf_counter()
            try:
                rc = self._rt().cudaHostRegister(ptr, size, HOST_REGISTER_PORTABLE | HOST_REGISTER_MAPPED)
                why = "" if _code(rc) == 0 else f"failed with CUDA error {_code(rc)} ({rc})"
            except Exception as exc:  # noqa: BLE001 - a torch without cudart bindings: the old path
                why = f"could not be called ({type(exc).__name__}: {exc})"
            dt = time.perf_counter() - t0
            if why:
                self._failed = f"cudaHostRegister of {size} bytes of shared memory {why}"
                log.warning("tierckpt: %s; CUDA tensors are copied into unregistered shared memory from now "
                            "on (correct, about 4x slower to save and 8x slower to load). Raise the locked-memory "
                            "limit (ulimit -l unlimited) to register it.", self._failed)
                self.unregistered_copies += 1
                return False
            self._entries[ptr] = _Entry(ptr, size, vma.file, vma.pgoff)
            self.registrations += 1
            self.registered_bytes += size
            self.register_seconds += dt
            log.info("tierckpt: registered %.1f MiB of shared memory with CUDA in %.3f s (once per mapping "
                     "the client keeps; %d registrations, %.3f s in all)", size / 2**20, dt,
                     self.registrations, self.register_seconds)
            return True

    def alias(self, ptr: int, size: int) -> int | None:
        """The address of a registered mapping of the bytes at [ptr, ptr + size) (same file, same
        offsets), or None. ptr is typically a read-only view of a step this process saved."""
        with self._mu:
            if not self._entries:
                return None
            vmas = _read_maps(self._maps)
            vma = _vma_of(vmas, ptr)
            if vma is None or vma.file == (0, 0):
                return None
            off = vma.pgoff + (ptr - vma.start)
            for e in self._entries.values():
                held = _vma_of(vmas, e.ptr)
                if (e.file == vma.file and held is not None and held.file == e.file
                        and e.file_offset <= off and off + size <= e.file_offset + e.size):
                    self.registered_loads += 1
                    return e.ptr + (off - e.file_offset)
            return None

    def _sweep(self, vmas: list[_Vma]) -> None:
        for e in list(self._entries.values()):
            v = _vma_of(vmas, e.ptr)
            if v is None or v.file != e.file or v.start != e.ptr or v.end != e.ptr + e.size:
                self._unregister(e)

    def _unregister(self, e: _Entry) -> None:
        self._entries.pop(e.ptr, None)
        rc = self._rt().cudaHostUnregister(e.ptr)
        self.unregistrations += 1
        if _code(rc) != 0:
            log.warning("tierckpt: cudaHostUnregister of a released shared-memory mapping (%d bytes) failed with "
                        "CUDA error %d; its pages stay locked until the process ends", e.size, _code(rc))

    def clear(self) -> None:
        """Unregisters every mapping (tests; a process that stops saving)."""
        with self._mu:
            for e in list(self._entries.values()):
                self._unregister(e)

    def stats(self) -> dict:
        with self._mu:
            return {"registrations": self.registrations, "registered_bytes": self.registered_bytes,
                    "register_seconds": self.register_seconds, "unregistrations": self.unregistrations,
                    "live": len(self._entries), "unregistered_copies": self.unregistered_copies,
                    "registered_loads": self.registered_loads,
                    "failed": self._failed}


def _code(rc) -> int:
    return rc if isinstance(rc, int) else int(getattr(rc, "value", rc))


_registry: HostRegistry | None = None
_registry_mu = threading.Lock()


def registry() -> HostRegistry:
    """The process's registry (created on first use; creating it touches no CUDA)."""
    global _registry
    with _registry_mu:
        if _registry is None:
            _registry = HostRegistry()
        return _registry


def stats() -> dict:
    """Registrations so far (count, bytes, seconds) and fallbacks; zeros before any CUDA save."""
    return registry().stats()


class HostCopies:
    """Device-to-host copies enqueued on side streams; wait() returns once they are done."""

    def __init__(self, events: list) -> None:
        self._events = events

    def wait(self) -> None:
        for ev in self._events:
            ev.synchronize()
        self._events = []


_side_streams: dict[int, object] = {}


def _side_stream(device: torch.device):
    index = device.index if device.index is not None else torch.cuda.current_device()
    s = _side_streams.get(index)
    if s is None:
        s = _side_streams[index] = torch.cuda.Stream(device=index)
    return s


def to_host(buffer_ptr: int, buffer_size: int, pairs: list[tuple[torch.Tensor, torch.Tensor]]) -> HostCopies:
    """Enqueues dst.copy_(src, non_blocking=True) for each (host dst, CUDA src) pair.

    buffer_ptr, buffer_size: the object's whole mapping, registered once (HostRegistry.ensure).
    The copies of each device run on that device's side stream after the work already enqueued
    on its current stream. The caller waits (HostCopies.wait) before it seals the object.
    """
    if not pairs:
        return HostCopies([])
    registry().ensure(buffer_ptr, buffer_size)
    by_device: dict[torch.device, list] = {}
    for dst, src in pairs:
        by_device.setdefault(src.device, []).append((dst, src))
    events = []
    for device, group in by_device.items():
        side = _side_stream(device)
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side):
            for dst, src in group:
                dst.copy_(src, non_blocking=True)
            ev = torch.cuda.Event()
            ev.record(side)
        events.append(ev)
    return HostCopies(events)


def device_source(base: torch.Tensor | None) -> torch.Tensor | None:
    """A uint8 tensor over a registered mapping of the same bytes as base (a read-only view's
    data), or None (no CUDA in use, or nothing registered holds these bytes)."""
    if base is None or not len(base) or not torch.cuda.is_initialized() or _registry is None:
        return None
    addr = _registry.alias(base.data_ptr(), base.numel())
    if addr is None:
        return None
    raw = (ctypes.c_uint8 * base.numel()).from_address(addr)
    import warnings
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The given buffer is not writable")
        return torch.frombuffer(raw, dtype=torch.uint8)


def synchronize(targets) -> None:
    """Waits for the host-to-device copies into targets (only when one of them is on CUDA)."""
    devices = {t.device for t in targets if t.device.type == "cuda"}
    for d in devices:
        torch.cuda.current_stream(d).synchronize()
