"""Exceptions raised by tierckpt, and the status codes they carry.

The native module turns every C++ Status into one of these (in one function,
python/src/tierckpt_ext.cc):

    not found          -> FileNotFoundError
    already exists     -> FileExistsError   (a committed step, a sealed object,
                                             a step another writer owns)
    permission denied  -> PermissionError
    invalid argument   -> ValueError
    timeout            -> TimeoutError
    unavailable        -> ConnectionError   (no agent answers on the socket)
    corruption         -> CorruptionError   (an OSError: a checksum mismatch)
    anything else      -> TierckptError     (a RuntimeError)

Each exception raised from native code has a ``code`` attribute: the numeric
status code, a :class:`Code`. Use :func:`code_of` to read it safely.

:class:`Code` is built from the C++ table itself (TIERCKPT_STATUS_CODES in
include/tierckpt/status.h, exported by the native module): ``kAlreadyExists``
is ``Code.ALREADY_EXISTS``, with the same stable number.
"""
from __future__ import annotations

import enum
import re

from . import _tierckpt

__all__ = ["Code", "CorruptionError", "TierckptError", "code_of", "with_context"]


def _python_name(cpp_name: str) -> str:
    """kAlreadyExists -> ALREADY_EXISTS."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", cpp_name[1:]).upper()


Code = enum.IntEnum("Code", [(_python_name(name), number) for name, number, _ in _tierckpt.status_codes()],
                    module=__name__)
Code.__doc__ = "Status codes of the C++ core (include/tierckpt/status.h); stable numbers."


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


def with_context(e: Exception, message: str) -> Exception:
    """An exception of e's type (so callers catch what they would have) saying message, with e's
    ``code`` when it has one; a RuntimeError when e's type cannot be built from a message alone."""
    try:
        out = type(e)(message)
    except Exception:  # noqa: BLE001 - a type whose constructor takes other arguments
        return RuntimeError(message)
    if hasattr(e, "code"):
        out.code = e.code
    return out
