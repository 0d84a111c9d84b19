"""Step numbers and checkpoint ids (``tierckpt://<namespace>/<step>``)."""
from __future__ import annotations

import os
import re

__all__ = ["MAX_STEP", "check_step", "checkpoint_id", "parse_checkpoint_id"]

# Steps are spelled step_%010d in every path (docs/format.md).
MAX_STEP = 9_999_999_999
_ID_RE = re.compile(r"^tierckpt://([A-Za-z0-9_.-]{1,128})/(\d{1,10})$")


def check_step(step) -> int:
    """step as an int in [0, MAX_STEP]; ValueError otherwise."""
    if isinstance(step, bool) or not isinstance(step, int):
        try:
            if isinstance(step, bool) or int(step) != step:
                raise ValueError
            step = int(step)
        except (TypeError, ValueError):
            raise ValueError(f"step must be an integer in [0, {MAX_STEP}], got {step!r}") from None
    if not 0 <= step <= MAX_STEP:
        raise ValueError(f"step must be an integer in [0, {MAX_STEP}], got {step}")
    return step


def checkpoint_id(ns: str, step: int) -> str:
    return f"tierckpt://{ns}/{step}"


def parse_checkpoint_id(value: str | os.PathLike) -> tuple[str, int]:
    """(namespace, step) of a ``tierckpt://<namespace>/<step>`` id; ValueError otherwise."""
    text = os.fspath(value) if isinstance(value, os.PathLike) else value
    m = _ID_RE.match(text) if isinstance(text, str) else None
    if m is None or m.group(1) in (".", ".."):
        raise ValueError(f"checkpoint id {value!r} is not tierckpt://<namespace>/<step>")
    return m.group(1), check_step(int(m.group(2)))
