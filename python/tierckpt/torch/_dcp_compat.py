"""The torch releases tierckpt.torch supports, and everything it takes from torch beyond DCP's public API.

tierckpt.torch writes steps in the stock ``FileSystemWriter`` format of
PyTorch DCP, so that stock ``dcp.load(..., storage_reader=FileSystemReader(dir))``
of every supported release reads them. Doing that without going through
FileSystemWriter means relying on names DCP and ``torch.save`` do not export:
``_StorageInfo`` (pickled by name into every ``.metadata``), the metadata file
name, ``CURRENT_DCP_VERSION``, the nested-dict helpers the planner uses, torch's
weights-only unpickler, and the functions whose frames show that a save is
running. Every such name is imported here and nowhere else; the rest of the
package imports it from this module. ``python/tests/test_dcp_compat.py`` pins,
per release, the format bits these names stand for (one test per release in
the range, each run under that release).

Supported: torch ``>= 2.9, < 2.15`` (``SUPPORTED_RANGE``). Checked before
anything private is imported: another release raises ImportError naming the
range and the pip command, never a warning (docs/decisions.md, decision 80).

Per-release differences handled here:

* 2.14 added ``torch.distributed.checkpoint.protocol.CheckpointableTensor``:
  a *plain* ``torch.Tensor`` carrying ``global_shape``/``global_offsets``/
  ``local_offsets``/``local_sizes`` is planned by DefaultSavePlanner as
  shards of a global tensor. :func:`plain_tensor` is False for such a tensor
  on 2.14 (so staging sends it through the planner and the Checkpointer
  refuses it like a DTensor), and :func:`copy_checkpointable_metadata` keeps
  those fields on its staging stand-in. Before 2.14 both are no-ops.
* ``dcp.load`` of 2.9 catches whatever ``StorageReader.read_metadata``
  raises, logs "Global metadata is not found" at INFO and fails on a bare
  ``assert metadata is not None``: the reader's message (no such step, a
  refused pickle) is lost. 2.13 keeps the exception and raises it.
  :func:`load_keeps_read_metadata_errors` tells which the running release
  does (from the source of ``_load_state_dict``, since the release that
  changed it was not pinned), and the reader logs its error where DCP drops it.
* ``dcp.save`` and ``dcp.load`` run the storage hooks ``prepare_local_plan``
  and ``prepare_global_plan`` from closures named ``local_step`` and
  ``global_step`` in ``state_dict_saver._save_state_dict`` /
  ``state_dict_loader._load_state_dict``, which hold the save's ``planner`` and
  its ``distW`` (the process group). :func:`dcp_step_locals` finds them; the
  writer's and reader's plan caching (_plan_cache.py) is used only when it
  does, so a release that renamed them plans as before.
* ``DefaultLoadPlanner.create_local_plan`` calls the module function
  ``default_planner.create_default_local_load_plan``, looked up at call time,
  which builds each read item through ``planner_helpers._create_read_items``.
  :func:`local_load_plan_function` lends the first to a function of the
  reader's for one call (decision 169); :data:`create_read_items` is the
  second, None where a release lacks it (the reader then keeps DCP's plan).
* A process-based async save runs in
  ``_ProcessBasedAsyncCheckpointExecutor._execute_save_impl`` where the
  release has that method; where it is absent, ``_save_state_dict`` alone
  marks a running save (:func:`save_code_objects`).
"""
from __future__ import annotations

import contextlib
import re
import sys

import torch

__all__ = [
    "CURRENT_DCP_VERSION", "DEFAULT_SUFFIX", "METADATA_FILE", "METADATA_FIELDS", "SUPPORTED_RANGE",
    "CompleteStager", "DCP_LOCAL_LOAD_PLAN", "StorageInfo", "check_release", "copy_checkpointable_metadata",
    "create_read_items", "dcp_step_locals", "element_size", "local_load_plan_function",
    "flatten_state_dict", "is_checkpointable_tensor", "load_keeps_read_metadata_errors", "metadata_private_globals", "narrow_tensor_by_index",
    "plain_tensor", "plan_usable", "release", "save_code_objects", "set_element", "storage_transforms",
    "weights_only_unpickler",
]

# [first, end): the releases whose DCP internals and format this module is written against.
SUPPORTED_FIRST = (2, 9)
SUPPORTED_END = (2, 15)
SUPPORTED_RANGE = ">=2.9,<2.15"
PIP_COMMAND = f"pip install 'torch{SUPPORTED_RANGE}'"

_RELEASE = re.compile(r"^(\d+)\.(\d+)")


def check_release(version: str) -> tuple[int, int]:
    """(major, minor) of a torch version string; ImportError if it is outside SUPPORTED_RANGE."""
    m = _RELEASE.match(str(version))
    if m is None:
        raise ImportError(f"tierckpt.torch supports torch {SUPPORTED_RANGE} (2.9 to 2.14); cannot read the "
                          f"release of torch {version!r}. Install a supported one: {PIP_COMMAND}")
    rel = (int(m.group(1)), int(m.group(2)))
    if not SUPPORTED_FIRST <= rel < SUPPORTED_END:
        raise ImportError(f"tierckpt.torch supports torch {SUPPORTED_RANGE} (2.9 to 2.14), and this is torch "
                          f"{version}: the step format and DCP's internals it relies on are checked for those "
                          f"releases only (docs/python.md, \"Supported torch releases\"). Install a supported "
                          f"one: {PIP_COMMAND}")
    return rel


# Before any private name below is imported: an unsupported torch fails here, with the range.
release = check_release(torch.__version__)

# ---- private names, imported here only ----------------------------------------------------------

import torch.distributed.checkpoint.default_planner as _default_planner  # noqa: E402
import torch.distributed.checkpoint.filesystem as _filesystem  # noqa: E402
from torch.distributed._shard._utils import narrow_tensor_by_index  # noqa: E402,F401
from torch.distributed.checkpoint._nested_dict import flatten_state_dict  # noqa: E402,F401
from torch.distributed.checkpoint._traverse import set_element  # noqa: E402,F401
from torch.distributed.checkpoint.metadata import Metadata  # noqa: E402
from torch.distributed.checkpoint.staging import AsyncStager  # noqa: E402

# The per-item location pickled into .metadata: the stock reader unpickles it by this class's name.
StorageInfo = _filesystem._StorageInfo
CURRENT_DCP_VERSION: str = _filesystem.CURRENT_DCP_VERSION
DEFAULT_SUFFIX: str = _filesystem.DEFAULT_SUFFIX  # data files are __<rank>_<n><DEFAULT_SUFFIX>
METADATA_FILE: str = _filesystem._metadata_fn  # the step's global metadata file

# Metadata's dataclass fields, in order (_metadata_pickle splices a pickle of them).
METADATA_FIELDS = ("state_dict_metadata", "planner_data", "storage_data", "storage_meta", "version")

try:  # 2.14+
    from torch.distributed.checkpoint.protocol import _copy_checkpointable_tensor_metadata
    from torch.distributed.checkpoint.protocol import _is_checkpointable_tensor
except ImportError:  # 2.9 - 2.13: no CheckpointableTensor protocol
    _is_checkpointable_tensor = None
    _copy_checkpointable_tensor_metadata = None

_PLAIN = (torch.Tensor, torch.nn.Parameter)

try:
    from torch.distributed.checkpoint.planner_helpers import _create_read_items as create_read_items
except ImportError:  # pragma: no cover - the reader keeps DCP's own load plan
    create_read_items = None
# The function DefaultLoadPlanner.create_local_plan calls, as found at import.
DCP_LOCAL_LOAD_PLAN = getattr(_default_planner, "create_default_local_load_plan", None)


@contextlib.contextmanager
def local_load_plan_function(fn):
    """Within, DefaultLoadPlanner.create_local_plan's call of create_default_local_load_plan goes to fn;
    afterwards the module holds DCP_LOCAL_LOAD_PLAN again, the function found at import (so a thread's
    exit never reinstates another thread's fn). fn must answer as DCP's function would."""
    _default_planner.create_default_local_load_plan = fn
    try:
        yield
    finally:
        _default_planner.create_default_local_load_plan = DCP_LOCAL_LOAD_PLAN


def is_checkpointable_tensor(value) -> bool:
    """Whether DCP plans value as shards of a global tensor through the CheckpointableTensor protocol (2.14+)."""
    return _is_checkpointable_tensor is not None and _is_checkpointable_tensor(value)


def plain_tensor(value) -> bool:
    """Whether DefaultSavePlanner saves value as one whole tensor at offset 0 (a plain, unsharded tensor)."""
    return type(value) in _PLAIN and not is_checkpointable_tensor(value)


def copy_checkpointable_metadata(src, dst) -> None:
    """Copies src's CheckpointableTensor fields to dst (a stand-in), if src has them."""
    if is_checkpointable_tensor(src):
        _copy_checkpointable_tensor_metadata(src, dst)


def element_size(dtype: torch.dtype) -> int:
    return torch._utils._element_size(dtype)


def weights_only_unpickler(file):
    """torch's weights-only unpickler over file (what torch.load(weights_only=True) uses for data.pkl)."""
    from torch import _weights_only_unpickler

    return _weights_only_unpickler.Unpickler(file, encoding="utf-8")


def metadata_private_globals() -> dict:
    """The non-public globals a pickled DCP Metadata names, by their pickled names."""
    return {f"{StorageInfo.__module__}.{StorageInfo.__name__}": StorageInfo,
            "torch.serialization._get_layout": torch.serialization._get_layout}


def storage_transforms(info) -> list:
    """The stream transforms (compression, ...) an item's StorageInfo says were applied; [] if none."""
    return list(getattr(info, "transform_descriptors", None) or [])


def plan_usable(plan) -> bool:
    """False for the stand-in DCP sends for a rank's unchanged plan (DefaultSavePlanner plan caching)."""
    return getattr(plan, "usable", True)


def load_keeps_read_metadata_errors() -> bool:
    """Whether ``dcp.load`` raises what ``StorageReader.read_metadata`` raised (2.13, 2.14) rather than
    swallowing it and failing on ``assert metadata is not None`` (2.9)."""
    import inspect

    from torch.distributed.checkpoint import state_dict_loader

    try:
        return "global_metadata_exc" in inspect.getsource(state_dict_loader._load_state_dict)
    except (OSError, TypeError):  # no source (a frozen install): assume the newer behaviour
        return True


def save_code_objects() -> frozenset:
    """The code of the DCP functions that run a save and hold its ``storage_writer`` as a local."""
    from torch.distributed.checkpoint import _async_process_executor as process_executor
    from torch.distributed.checkpoint import state_dict_saver

    codes = {state_dict_saver._save_state_dict.__code__}
    impl = process_executor._ProcessBasedAsyncCheckpointExecutor.__dict__.get("_execute_save_impl")
    if impl is not None:
        codes.add(getattr(impl, "__func__", impl).__code__)
    return frozenset(codes)


_STEP_MODULES = ("torch.distributed.checkpoint.state_dict_saver", "torch.distributed.checkpoint.state_dict_loader")
_STEP_NAMES = ("local_step", "global_step")


def dcp_step_locals(max_depth: int = 8) -> dict | None:
    """The locals of the DCP save/load step closure calling the current storage hook, or None.

    ``local_step``/``global_step`` of ``_save_state_dict``/``_load_state_dict`` hold ``planner``
    (and ``distW``, the process group wrapper) as free variables; None when no such frame is within
    max_depth callers (another release, or the hook was called outside DCP).
    """
    f = sys._getframe(2)
    for _ in range(max_depth):
        if f is None:
            return None
        code = f.f_code
        if (code.co_name in _STEP_NAMES and "planner" in code.co_freevars
                and f.f_globals.get("__name__") in _STEP_MODULES):
            return f.f_locals
        f = f.f_back
    return None


class CompleteStager(AsyncStager):
    """An AsyncStager whose stage() returns only once the staged copy is complete.

    DCP then never calls synchronize_staging() after starting the save
    (``AsyncStager._synchronize_after_execute``, a private switch).
    """

    _synchronize_after_execute = False


def _check_metadata_fields() -> None:
    import dataclasses

    fields = tuple(f.name for f in dataclasses.fields(Metadata))
    if fields != METADATA_FIELDS:
        raise ImportError(f"torch {torch.__version__}'s DCP Metadata has fields {fields}, not {METADATA_FIELDS}: "
                          "tierckpt.torch cannot write its .metadata. Install a supported torch: " + PIP_COMMAND)


_check_metadata_fields()
