"""The cyclic garbage collector paused over one DCP load, from its .metadata to its last read.

A load unpickles the step's whole ``.metadata`` on every rank (~940 KB, some 250 k objects for
1,500 tensors per rank) and builds a plan of its items; all of it lives until ``dcp.load`` returns
and is then freed by reference counting (none of it is cyclic). While it lives, the young
collections it sets off promote it to the oldest generation, and the count of promoted objects
triggers a full collection of the process's heap inside the load (280-370 ms on the 2-core VM,
docs/decisions.md, decision 91). Paused from ``read_metadata`` to the end of ``read_data``, none
of it is promoted, and freeing it at the end brings the counts back down.

:func:`pause` returns a :class:`Pause` whose ``resume()`` (idempotent) re-enables the collector
when no other pause is held and it was enabled when the first one began; a load that fails
between the two hooks resumes when its Metadata is freed (a ``weakref.finalize`` on it), so the
collector never stays off past the load's own objects. The collector is the process's: a thread
that allocates cyclic garbage during a load keeps it until the load ends.
"""
from __future__ import annotations

import gc
import threading
import weakref

__all__ = ["Pause", "pause", "resume_when_freed"]

_lock = threading.Lock()
_held = 0
_reenable = False


class Pause:
    """One load's hold on the paused collector."""

    def __init__(self) -> None:
        self._done = False

    def resume(self) -> None:
        global _held, _reenable
        with _lock:
            if self._done:
                return
            self._done = True
            _held -= 1
            if _held == 0 and _reenable:
                _reenable = False
                gc.enable()


def pause() -> Pause:
    """Pauses the collector (if it is enabled) until the returned Pause resumes."""
    global _held, _reenable
    with _lock:
        if _held == 0:
            _reenable = gc.isenabled()
            gc.disable()
        _held += 1
    return Pause()


def resume_when_freed(p: Pause, owner) -> None:
    """p resumes when owner is garbage, if it has not before."""
    weakref.finalize(owner, p.resume)
