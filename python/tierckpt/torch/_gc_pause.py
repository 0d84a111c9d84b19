"""The cyclic garbage collector paused over one DCP load, from its .metadata to its last read, and over
one DCP save's plan exchange.

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

A save's full round (the first, and any whose layout changed) exchanges pickled plans of every
item and the write results, and broadcasts the step's Metadata to every rank: ~30 k objects per plan
of 1,556 tensors (counted from its pickle) and ~250 k for the Metadata, alive together, whose young
collections set off full ones; the first cached round, which builds the Metadata's pickle cache
(decision 90), set one off too. So every save is paused (decision 174): :func:`pause_for` ("save")
from the writer's ``set_up_storage_writer`` until DCP's process-group wrapper of that save is freed,
which is when its save step returns on that rank (the broadcast's unpickling is its last work). A
failed save's wrapper may be kept by its exception's traceback, in a cycle only a collection frees:
the writer resumes in its own hooks' failures, the next save of the process resumes the last pause of
its kind, and each such pause resumes by itself after ``limit_s`` (a timer thread) whatever happens.
"""
from __future__ import annotations

import gc
import threading
import weakref

__all__ = ["Pause", "pause", "pause_for", "resume_held", "resume_when_freed"]

_lock = threading.Lock()
_held = 0
_reenable = False
_last: dict[str, "Pause"] = {}  # the last pause_for of each kind


class Pause:
    """One load's or save's hold on the paused collector."""

    def __init__(self) -> None:
        self._done = False
        self._timer: threading.Timer | None = None

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
            timer, self._timer = self._timer, None
        if timer is not None and timer is not threading.current_thread():
            timer.cancel()


def pause() -> Pause:
    """Pauses the collector (if it is enabled) until the returned Pause resumes."""
    global _held, _reenable
    with _lock:
        if _held == 0:
            _reenable = gc.isenabled()
            gc.disable()
        _held += 1
    return Pause()


def pause_for(kind: str, limit_s: float) -> Pause:
    """pause(), after resuming the last pause_for(kind) if it is still held; resumes by itself after limit_s."""
    with _lock:
        last = _last.pop(kind, None)
    if last is not None:
        last.resume()
    p = pause()
    timer = threading.Timer(limit_s, p.resume)
    timer.daemon = True
    with _lock:
        _last[kind] = p
        p._timer = timer
    timer.start()
    return p


def resume_when_freed(p: Pause, owner) -> None:
    """p resumes when owner is garbage, if it has not before."""
    weakref.finalize(owner, p.resume)


def resume_held(holder) -> None:
    """Resumes the pause a reader or writer holds in its ``_gc_pause`` attribute, if any, and clears it."""
    p, holder._gc_pause = getattr(holder, "_gc_pause", None), None
    if p is not None:
        p.resume()
