"""Step numbers and checkpoint ids (``tierckpt://<namespace>/<step>``).

The rules themselves (namespace characters and length, the step range) are the
C++ core's (src/common/names.h), reached through the native module; this
module only turns Python values into the text those rules read.
"""
from __future__ import annotations

import os

from .. import _tierckpt

__all__ = ["MAX_STEP", "check_step", "checkpoint_id", "parse_checkpoint_id"]

# Steps are spelled step_%010d in every path (docs/format.md).
MAX_STEP: int = _tierckpt.MAX_STEP
_SCHEME = "tierckpt://"


def check_step(step) -> int:
    """step as an int in [0, MAX_STEP]; ValueError otherwise."""
    if isinstance(step, bool) or not isinstance(step, int):
        try:
            if isinstance(step, bool) or int(step) != step:
                raise ValueError
            step = int(step)
        except (TypeError, ValueError):
            raise ValueError(f"step must be an integer in [0, {MAX_STEP}], got {step!r}") from None
    return _tierckpt.parse_step(str(step))


def checkpoint_id(ns: str, step: int) -> str:
    return f"tierckpt://{ns}/{step}"


def parse_checkpoint_id(value: str | os.PathLike) -> tuple[str, int]:
    """(namespace, step) of a ``tierckpt://<namespace>/<step>`` id; ValueError otherwise."""
    text = os.fspath(value) if isinstance(value, os.PathLike) else value
    if not isinstance(text, str) or not text.startswith(_SCHEME) or text.count("/") != 3:
        raise ValueError(f"checkpoint id {value!r} is not tierckpt://<namespace>/<step>")
    ns, _, step = text[len(_SCHEME):].partition("/")
    try:
        _tierckpt.validate_namespace(ns)
        return ns, _tierckpt.parse_step(step)
    except ValueError as e:
        raise ValueError(f"checkpoint id {value!r} is not tierckpt://<namespace>/<step>: {e}") from None
