"""Unpickling what a restore reads from a step without running the step's code.

A step's ``.metadata`` is a pickle of DCP's ``Metadata`` (DCP's format), and
the Checkpointer stores each non-tensor value as a ``torch.save`` archive.
``pickle.loads`` of either calls whatever callable the pickle names, so a step
written by anyone but the job (a durable base another party can write) would
run that party's code on restore (docs/security.md, "Trust of durable bases").

* :func:`load_metadata` unpickles ``.metadata`` with the C unpickler, whose
  ``find_class`` answers only the globals a DCP Metadata is made of: the
  classes of ``torch.distributed.checkpoint.metadata``, ``_StorageInfo``,
  ``torch.Size``, torch dtypes and layouts, ``pathlib`` paths (a
  ``checkpoint_id`` given as a path) and a few plain builtins, plus whatever
  ``torch.serialization.add_safe_globals`` allows (the user's own opt-in, the
  one ``torch.load(weights_only=True)`` honours). Any other global raises
  :class:`ForbiddenGlobalError` before it is looked up, so nothing it names runs.
  torch's own weights-only unpickler cannot be used: it does not read pickle
  protocol 4 (FRAME), which ``pickle.dumps`` and so DCP's FileSystemWriter write.
* :func:`load_value` is ``torch.load(weights_only=True)`` of one value, with an
  error naming the step, the key and the opt-ins when torch refuses it.
"""
from __future__ import annotations

import _compat_pickle
import codecs
import collections
import enum
import functools
import inspect
import io
import pathlib
import pickle
from typing import Any

import torch
import torch.distributed.checkpoint.metadata as _dcp_metadata
from torch.distributed.checkpoint.metadata import Metadata

from ..errors import CorruptionError
from . import _dcp_compat

__all__ = ["ForbiddenGlobalError", "load_metadata", "load_value"]

_SECURITY = "docs/security.md, \"Trust of durable bases\""


class ForbiddenGlobalError(pickle.UnpicklingError):
    """A pickle of a step named a global the restricted unpickler does not allow; nothing of it ran."""


def _fixed_globals() -> dict[str, Any]:
    allowed: dict[str, Any] = {}
    for name, value in vars(_dcp_metadata).items():
        if inspect.isclass(value) and value.__module__ == _dcp_metadata.__name__:
            allowed[f"{_dcp_metadata.__name__}.{name}"] = value
    allowed.update(_dcp_compat.metadata_private_globals())  # _StorageInfo, torch.serialization._get_layout
    allowed["torch.Size"] = torch.Size
    allowed["torch.device"] = torch.device
    for name, value in vars(torch).items():
        if isinstance(value, torch.dtype):
            allowed[f"torch.{name}"] = value
    for cls in (pathlib.PurePath, pathlib.PurePosixPath, pathlib.PureWindowsPath, pathlib.Path,
                pathlib.PosixPath, pathlib.WindowsPath):
        allowed[f"pathlib.{cls.__name__}"] = cls
        allowed[f"{cls.__module__}.{cls.__name__}"] = cls  # pathlib._local on Python 3.13
    allowed["collections.OrderedDict"] = collections.OrderedDict
    allowed["builtins.set"] = set
    allowed["builtins.frozenset"] = frozenset
    allowed["builtins.bytearray"] = bytearray
    allowed["_codecs.encode"] = codecs.encode  # bytes, in pickle protocol 2
    return allowed


_FIXED = _fixed_globals()


def _user_globals() -> dict[str, Any]:
    """What torch.serialization.add_safe_globals (or the safe_globals context) allows now."""
    allowed: dict[str, Any] = {}
    for entry in torch.serialization.get_safe_globals():
        if isinstance(entry, tuple):
            value, name = entry
            allowed[name] = value
        else:
            allowed[f"{entry.__module__}.{entry.__qualname__}"] = entry
    return allowed


class _EnumMember:
    """What ``builtins.getattr`` means in a metadata pickle, and all it may do there.

    Python 3.11.0 to 3.11.4 (Debian 12's python3 is 3.11.2) pickle an Enum member as
    ``getattr(EnumClass, "NAME")`` instead of by value, so every DCP ``.metadata`` they write calls
    ``builtins.getattr`` on ``_MEM_FORMAT_ENCODING``. Here it answers only a member of an Enum class
    that the pickle could name (the class itself went through find_class first); any other use of
    getattr, which would reach any attribute of an allowed object, is refused.
    """

    def __init__(self, where: str, allowed) -> None:
        self._where = where
        self._allowed = allowed

    def __call__(self, owner: Any, name: Any, *default: Any) -> Any:
        if (inspect.isclass(owner) and issubclass(owner, enum.Enum) and isinstance(name, str)
                and name in owner.__members__ and not default and self._allowed(owner)):
            return owner[name]
        raise ForbiddenGlobalError(
            f"{self._where}: refused to unpickle it: it calls builtins.getattr on {owner!r} for {name!r}, and "
            "the restricted unpickler allows getattr only for a member of an Enum the metadata is made of "
            f"(how Python 3.11.0-3.11.4 pickle Enums); nothing of it was run ({_SECURITY}).")


def _allowed_class(user: dict, cls: type) -> bool:
    return any(v is cls for v in _FIXED.values()) or any(v is cls for v in user.values())


class _MetadataUnpickler(pickle.Unpickler):
    def __init__(self, data, where: str) -> None:
        super().__init__(io.BytesIO(data))
        self._where = where
        self._user = _user_globals()

    def find_class(self, module: str, name: str) -> Any:
        # Python 2 names (pickle protocol < 3 writes __builtin__ for builtins), as pickle's own find_class maps them.
        if (module, name) in _compat_pickle.NAME_MAPPING:
            module, name = _compat_pickle.NAME_MAPPING[(module, name)]
        elif module in _compat_pickle.IMPORT_MAPPING:
            module = _compat_pickle.IMPORT_MAPPING[module]
        full = f"{module}.{name}"
        if full == "builtins.getattr":
            # Not a bound method: the unpickler's memo keeps this object, and a reference back to the
            # unpickler would make a cycle that Python 3.11.2's Unpickler hides from the collector,
            # keeping every step's whole Metadata alive after the load (and, with the collector paused
            # over a load, its pause too: _gc_pause.py).
            return _EnumMember(self._where, functools.partial(_allowed_class, self._user))
        value = _FIXED.get(full)
        if value is None:
            value = self._user.get(full)
        if value is None:
            raise ForbiddenGlobalError(
                f"{self._where}: refused to unpickle it: it names {full}, which is not among the globals a DCP "
                "Metadata is made of, and nothing of it was run. A step whose metadata names other code was "
                "written by something other than a DCP writer, or by a party who may write where the step was "
                f"stored ({_SECURITY}). If {full} is a class of yours (a custom planner's data) and you trust "
                f"whoever wrote the step, allow it with torch.serialization.add_safe_globals([{full}]).")
        return value

    def persistent_load(self, pid: Any) -> Any:
        raise ForbiddenGlobalError(f"{self._where}: refused to unpickle it: it holds a persistent id, "
                                   "which a DCP Metadata never does")


def load_metadata(data, where: str) -> Metadata:
    """The DCP Metadata pickled in data (a step's .metadata; where names it in errors).

    ForbiddenGlobalError for a global outside the allow-list, pickle.UnpicklingError (or another
    error of the unpickler) for a damaged pickle, CorruptionError if it holds no Metadata.
    """
    metadata = _MetadataUnpickler(data, where).load()
    if not isinstance(metadata, Metadata):
        raise CorruptionError(f"{where} holds a {type(metadata).__name__}, not DCP Metadata")
    return metadata


def load_value(data, where: str, fqn: str, weights_only: bool = True) -> Any:
    """One non-tensor value the Checkpointer saved with torch.save (data: its archive's bytes).

    weights_only=True (default): torch.load's weights-only unpickler (plain Python types, tensors,
    torch.Size, dtypes, and what torch.serialization.add_safe_globals allows); a value it refuses
    raises pickle.UnpicklingError naming the step, the key and the ways to load it.
    weights_only=False: full pickle, for steps whose writers the caller trusts.
    """
    if not weights_only:
        return torch.load(io.BytesIO(data), weights_only=False)
    try:
        return torch.load(io.BytesIO(data), weights_only=True)
    except pickle.UnpicklingError as e:
        why = next((line.strip() for line in str(e).splitlines() if "GLOBAL" in line or "Can only" in line),
                   str(e).splitlines()[0] if str(e) else type(e).__name__)
        why = why.removeprefix("WeightsUnpickler error: ").split(" Please use ")[0].rstrip(".")
        raise pickle.UnpicklingError(
            f"{where}: the value {fqn!r} is not a plain type the weights-only unpickler loads ({why}). "
            "Nothing of it was run. If you trust whoever wrote the step, load it with "
            "Checkpointer.load(..., weights_only=False), or allow its class with "
            f"torch.serialization.add_safe_globals([...]) ({_SECURITY}).") from e
