"""One save at a time per (agent, namespace) in a process: the async_save guard.

Stock DCP lets a second ``async_save`` start while the first one's background
save still runs its collectives; the two interleave on the process group and
hang. We refuse the second one at once, before it issues any collective:
``TieredWriter.stage()`` runs synchronously inside ``dcp.async_save`` and
calls :func:`begin` first.

A save is *in flight* while some thread (the background thread in THREAD
mode, the thread waiting for the checkpoint process in PROCESS mode, the
caller's thread for a blocking save) is inside DCP's save functions with our
writer as ``storage_writer``. That is observed directly on the threads'
stacks, so a save that failed — whose future still holds its exception — is
never mistaken for a running one. Between staging and the moment the
background thread enters DCP (normally microseconds) the save counts as in
flight too; a staged save that never starts within ``_START_GRACE_S``
belongs to an async_save that failed before submitting its work.
"""
from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass, field

from . import _dcp_compat

__all__ = ["SaveInFlightError", "begin", "discard", "started"]

_START_GRACE_S = 5.0


class SaveInFlightError(RuntimeError):
    """A save into the same namespace is still running in this process."""


_SAVE_CODES: frozenset | None = None


def _save_running(token: str) -> bool:
    """Whether another thread is inside a DCP save whose storage_writer is the writer of token."""
    global _SAVE_CODES
    if _SAVE_CODES is None:
        _SAVE_CODES = _dcp_compat.save_code_objects()
    me = threading.get_ident()
    for ident, frame in sys._current_frames().items():
        if ident == me:
            continue
        while frame is not None:
            if frame.f_code in _SAVE_CODES:
                writer = frame.f_locals.get("storage_writer")
                if getattr(writer, "save_id", None) == token:
                    return True
            frame = frame.f_back
    return False


@dataclass
class _Entry:
    token: str
    step: int
    staged_at: float
    started: threading.Event = field(default_factory=threading.Event)


_lock = threading.Lock()
_entries: dict[tuple[str, str], _Entry] = {}


def _running(entry: _Entry) -> bool:
    deadline = entry.staged_at + _START_GRACE_S
    while True:
        if _save_running(entry.token):
            return True
        if entry.started.is_set() or time.monotonic() >= deadline:
            # It ran and is done, or its async_save failed before the save began.
            return False
        time.sleep(0.01)


def _refuse(key: tuple[str, str], entry: _Entry, step: int) -> None:
    raise SaveInFlightError(
        f"a save of step {entry.step} into namespace {key[1]!r} (agent {key[0]}) is still in flight in "
        f"this process; wait for it (the future of the previous dcp.async_save: .result()) before "
        f"saving step {step}. Overlapping saves would interleave their collectives and hang.")


def begin(socket: str, ns: str, token: str, step: int) -> None:
    """Registers a staged save; raises SaveInFlightError if another one is in flight."""
    key = (socket, ns)
    with _lock:
        previous = _entries.get(key)
    if previous is not None and previous.token != token and _running(previous):
        _refuse(key, previous, step)
    with _lock:
        _entries[key] = _Entry(token=token, step=step, staged_at=time.monotonic())


def started(socket: str, ns: str, token: str, step: int) -> None:
    """Marks the calling thread as running the save of token.

    Called from the writer's first method on the thread that runs the save.
    A save that was not staged here (blocking dcp.save, or another stager)
    registers now, and is refused if another one is in flight.
    """
    key = (socket, ns)
    with _lock:
        entry = _entries.get(key)
        if entry is not None and entry.token == token:
            entry.started.set()
            return
    if entry is not None and _running(entry):
        _refuse(key, entry, step)
    fresh = _Entry(token=token, step=step, staged_at=time.monotonic())
    fresh.started.set()
    with _lock:
        _entries[key] = fresh


def discard(socket: str, ns: str, token: str) -> None:
    """Forgets the staged save of token (its staging failed, so it will never run)."""
    with _lock:
        entry = _entries.get((socket, ns))
        if entry is not None and entry.token == token:
            del _entries[(socket, ns)]
