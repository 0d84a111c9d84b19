"""Exceptions raised by tierckpt, and the status codes they carry.

The native module turns every C++ Status into one of these (in one function,
python/src/tierckpt_ext.cc):

    not found          -> FileNotFoundError
    invalid argument   -> ValueError
    timeout            -> TimeoutError
    unavailable        -> ConnectionError   (no agent answers on the socket)
    corruption         -> CorruptionError   (an OSError: a checksum mismatch)
    anything else      -> TierckptError     (a RuntimeError)

Each exception raised from native code has a ``code`` attribute: the numeric
status code, a :class:`Code`. Use :func:`code_of` to read it safely.
"""
from __future__ import annotations

import enum

__all__ = ["Code", "CorruptionError", "TierckptError", "code_of"]


class Code(enum.IntEnum):
    """Status codes of the C++ core (include/tierckpt/status.h); stable numbers."""

    OK = 0
    INVALID_ARGUMENT = 1
    NOT_FOUND = 2
    ALREADY_EXISTS = 3
    RESOURCE_EXHAUSTED = 4
    CORRUPTION = 5
    IO_ERROR = 6
    UNAVAILABLE = 7
    PERMISSION_DENIED = 8
    FAILED_PRECONDITION = 9
    PROTOCOL_ERROR = 10
    TIMEOUT = 11
    ABORTED = 12
    INTERNAL = 13
    UNIMPLEMENTED = 14


class TierckptError(RuntimeError):
    """An error of the agent or the client that has no closer Python built-in."""

    code: int | None = None


class CorruptionError(OSError):
    """A copy whose bytes do not match their checksum (memory or durable tier)."""

    code: int | None = int(Code.CORRUPTION)


def code_of(exc: BaseException) -> Code | None:
    """The status code carried by an exception raised by tierckpt, else None."""
    code = getattr(exc, "code", None)
    if isinstance(code, int):
        try:
            return Code(code)
        except ValueError:
            return None
    return None
