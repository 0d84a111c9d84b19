"""PyTorch Lightning with tierckpt: a ``CheckpointIO`` plugin that saves through the tiers.

    import lightning as L
    from lightning.pytorch.callbacks import ModelCheckpoint
    from lightning.pytorch.plugins.io import AsyncCheckpointIO   # optional
    from tierckpt.lightning import LATEST, TieredCheckpointIO
    from tierckpt.torch import CheckpointConfig

    cfg = CheckpointConfig("my-run", durable="/mnt/ckpt", persist_every=1000)
    trainer = L.Trainer(plugins=[TieredCheckpointIO(cfg)],         # or AsyncCheckpointIO(TieredCheckpointIO(cfg))
                        callbacks=[ModelCheckpoint(dirpath="ckpt", every_n_train_steps=100, save_last=True)])
    trainer.fit(model, ckpt_path="last")       # or ckpt_path=LATEST: the newest step every rank can load

Each ``trainer.save_checkpoint`` (ModelCheckpoint's included) becomes step
``checkpoint["global_step"]`` of ``config.namespace``, saved by
:class:`tierckpt.torch.Checkpointer` on the rank that saves (rank 0: Lightning's
DDP and single-device strategies save the whole checkpoint there). The step
is committed in the node agent's memory when ``save_checkpoint`` returns, and
persisted to the durable tier in the background when its number is a multiple
of ``config.persist_every``. The file Lightning names (``epoch=0-step=100.ckpt``,
``last.ckpt``) becomes a small JSON *pointer* to that step, written after the
commit, so ModelCheckpoint's top-k, ``save_last`` and ``ckpt_path="last"`` work
unchanged. Loading (``trainer.fit(ckpt_path=...)``, on every rank) reads the
step from the fastest tier holding a verified copy: memory, a peer, or the
durable tier.

How a Lightning checkpoint is stored (decision 85): every tensor of the dict,
at any depth, is an item of the step under its path (``state_dict.layer.weight``,
``optimizer_states.0.state.0.exp_avg``), copied straight into shared memory;
everything else (loop progress, ``param_groups``, callback state, hyper-parameters)
is one ``torch.save`` of the dict with each tensor replaced by a reference,
loaded with ``weights_only`` as Lightning asks (default: torch's, ``True``). So
int keys, tuples, empty dicts and ``OrderedDict`` come back as they were saved.

A second save at the global step this plugin saved last (ModelCheckpoint's
``last.ckpt`` beside the top-k file of the same step, a save after ``fit``
ends) writes its pointer to that step, as ``save_last="link"`` does. A step
number committed by an earlier run (one resumed from an older checkpoint saves
those steps again) is replaced, as ``torch.save`` over an existing file does.
``remove_checkpoint`` removes the pointer only: the steps themselves follow the
tiers' retention (``keep_last``, ``durable_keep``).

Strategies that shard the checkpoint (FSDP, ModelParallel, DeepSpeed) save or load it
without ``CheckpointIO``, so they are not supported: use ``dcp.save`` with
``tierckpt.torch.TieredWriter`` there. docs/frameworks.md.
"""
from __future__ import annotations

import copy
import io
import json
import logging
import os
import tempfile
from collections.abc import Mapping
from typing import Any

try:
    from lightning.fabric.plugins.io.checkpoint_io import CheckpointIO
    from lightning.fabric.plugins.io.torch_io import TorchCheckpointIO
    from lightning.fabric.utilities.cloud_io import get_filesystem
except ImportError as e:  # pragma: no cover - exercised only where lightning is missing
    raise ImportError("tierckpt.lightning needs PyTorch Lightning (the `lightning` package; tested with "
                      f"2.6.6): pip install 'lightning==2.6.6' ({e})") from e

import torch
import torch.distributed as dist
from fsspec.implementations.local import LocalFileSystem

from ._replace import delete_if_committed
from .config import CheckpointConfig
from .torch import Checkpointer, agreed_step
from .torch._ids import check_step, checkpoint_id

__all__ = ["LATEST", "TieredCheckpointIO", "read_pointer"]

log = logging.getLogger("tierckpt")

# ckpt_path value: the newest step of the plugin's namespace that every rank can load (agreed_step).
LATEST = "tierckpt:latest"

_POINTER_KIND = "tierckpt-lightning-pointer"
_POINTER_MAX = 4096
_TENSORS = "tensors"  # the step's items: every tensor of the checkpoint, by path
_REST = "checkpoint"  # torch.save of the checkpoint with each tensor replaced by a _TensorRef


class _TensorRef:
    """Where a tensor was in the checkpoint dict: its item key in the step, shape and dtype."""

    __slots__ = ("key", "shape", "dtype")

    def __init__(self, key: str, shape: tuple, dtype: torch.dtype) -> None:
        self.key, self.shape, self.dtype = key, tuple(shape), dtype

    def __reduce__(self):
        return (_TensorRef, (self.key, self.shape, self.dtype))


def _split(obj: Any, path: str, tensors: dict[str, torch.Tensor], seen: dict[int, _TensorRef]) -> Any:
    """obj with every tensor inside dicts, lists and tuples replaced by a _TensorRef (the tensor in tensors)."""
    if isinstance(obj, torch.Tensor):
        ref = seen.get(id(obj))
        if ref is None:
            key = path or "tensor"
            n = 1
            while key in tensors:  # "0" and 0 as keys of one dict
                n += 1
                key = f"{path}#{n}"
            tensors[key] = obj.detach()
            ref = seen[id(obj)] = _TensorRef(key, obj.shape, obj.dtype)
        return ref
    prefix = f"{path}." if path else ""
    if isinstance(obj, Mapping):
        out = copy.copy(obj)  # keeps the mapping's type (OrderedDict, Lightning's AttributeDict) and attributes
        for k, v in obj.items():
            out[k] = _split(v, f"{prefix}{k}", tensors, seen)
        return out
    if isinstance(obj, list):
        out = copy.copy(obj)
        for i, v in enumerate(obj):
            out[i] = _split(v, f"{prefix}{i}", tensors, seen)
        return out
    if isinstance(obj, tuple):
        items = [_split(v, f"{prefix}{i}", tensors, seen) for i, v in enumerate(obj)]
        return type(obj)(*items) if hasattr(obj, "_fields") else type(obj)(items)
    return obj


def _join(obj: Any, tensors: dict[str, torch.Tensor]) -> Any:
    """The inverse of _split, in place where it can be (obj is freshly unpickled)."""
    if isinstance(obj, _TensorRef):
        return tensors[obj.key]
    if isinstance(obj, Mapping):
        for k, v in list(obj.items()):
            obj[k] = _join(v, tensors)
        return obj
    if isinstance(obj, list):
        for i, v in enumerate(obj):
            obj[i] = _join(v, tensors)
        return obj
    if isinstance(obj, tuple):
        items = [_join(v, tensors) for v in obj]
        return type(obj)(*items) if hasattr(obj, "_fields") else type(obj)(items)
    return obj


def _refs(obj: Any, out: dict[str, _TensorRef]) -> dict[str, _TensorRef]:
    if isinstance(obj, _TensorRef):
        out[obj.key] = obj
    elif isinstance(obj, Mapping):
        for v in obj.values():
            _refs(v, out)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            _refs(v, out)
    return out


def read_pointer(path) -> dict | None:
    """The pointer a TieredCheckpointIO wrote at path (namespace, step, ...); None if path is something else."""
    fs = get_filesystem(path)
    with fs.open(str(path), "rb") as f:
        head = f.read(_POINTER_MAX + 1)
    try:
        pointer = json.loads(head.decode())
    except (UnicodeDecodeError, ValueError):
        return None
    return pointer if isinstance(pointer, dict) and pointer.get("kind") == _POINTER_KIND else None


def _write_pointer(path, pointer: dict) -> None:
    """Writes the pointer whole or not at all (a local file: a temporary renamed into place)."""
    data = json.dumps(pointer, sort_keys=True).encode() + b"\n"
    fs = get_filesystem(path)
    if isinstance(fs, LocalFileSystem):
        path = os.fspath(path)
        directory = os.path.dirname(os.path.abspath(path))
        os.makedirs(directory, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tierckpt-pointer.", dir=directory)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass
            raise
        return
    fs.makedirs(os.path.dirname(str(path)), exist_ok=True)
    with fs.open(str(path), "wb") as f:
        f.write(data)


class TieredCheckpointIO(CheckpointIO):
    """Lightning's checkpoint IO through the tierckpt agent: ``Trainer(plugins=[TieredCheckpointIO(cfg)])``.

    Args:
        config: the run's CheckpointConfig (namespace, durable base, ``persist_every`` in global steps).

    Lightning's ``AsyncCheckpointIO`` wraps it like any CheckpointIO: the tensors are cloned on the
    training thread and the save runs on a worker thread. Without it a save blocks for one copy of
    the checkpoint into shared memory and the commit; the durable copy is written in the background
    either way.
    """

    def __init__(self, config: CheckpointConfig) -> None:
        self.config = config.resolve()
        self._checkpointers: dict[int, Checkpointer] = {}  # by id of the world group they were made for
        self._solo_groups: dict[int, Any] = {}
        self._last_step: int | None = None  # the step this plugin saved last (a second save of it points at it)

    def __repr__(self) -> str:
        return f"TieredCheckpointIO({self.config.namespace!r})"

    # ---- one rank's Checkpointer ----

    def _checkpointer(self) -> Checkpointer:
        """A Checkpointer over a group of this rank alone: Lightning saves on rank 0 only, and every
        rank loads the whole checkpoint by itself (no collective either way)."""
        group = None
        key = 0
        if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
            key = id(dist.group.WORLD)
            group = self._solo_groups.get(key)
            if group is None:
                group = dist.new_group([dist.get_rank()], backend="gloo", use_local_synchronization=True)
                self._solo_groups[key] = group
        ck = self._checkpointers.get(key)
        if ck is None:
            ck = self._checkpointers[key] = Checkpointer(self.config, group=group)
        return ck

    # ---- CheckpointIO ----

    def save_checkpoint(self, checkpoint: dict[str, Any], path, storage_options: Any | None = None) -> None:
        """Saves checkpoint as step checkpoint["global_step"], then writes the pointer at path."""
        if storage_options is not None:
            raise TypeError(f"{self!r} takes no storage_options (got {storage_options!r}); the durable cadence is "
                            "CheckpointConfig.persist_every")
        if "global_step" not in checkpoint:
            raise ValueError(f"{self!r}: the checkpoint for {path} has no 'global_step', which names its tierckpt "
                             "step; save it through Trainer.save_checkpoint")
        ns, step = self.config.namespace, check_step(checkpoint["global_step"])
        if step == self._last_step:
            log.debug("tierckpt: %s for %s: this run saved that step already", checkpoint_id(ns, step), path)
        else:
            tensors: dict[str, torch.Tensor] = {}
            buf = io.BytesIO()
            torch.save(_split(checkpoint, "", tensors, {}), buf)
            delete_if_committed(self.config, step, f"the checkpoint for {path}")
            self._checkpointer().save(step, {_TENSORS: tensors, _REST: buf.getvalue()})
            self._last_step = step
        _write_pointer(path, {"kind": _POINTER_KIND, "version": 1, "namespace": ns, "step": step,
                              "epoch": checkpoint.get("epoch"), "checkpoint_id": checkpoint_id(ns, step)})

    def load_checkpoint(self, path, map_location: Any | None = None, weights_only: bool | None = None) -> dict:
        """The checkpoint a pointer at path names, ``LATEST``'s step, or a plain torch.save file at path.

        With ``LATEST`` every rank must call it (Lightning does): the step is the newest every rank
        can load (``tierckpt.torch.agreed_step``). FileNotFoundError when there is none.
        """
        if str(path) == LATEST:
            step = agreed_step(self.config)
            if step is None:
                raise FileNotFoundError(f"ckpt_path={LATEST!r}: namespace {self.config.namespace!r} has no step every "
                                        "rank can load (tierckpt ls shows what each agent holds)")
        else:
            fs = get_filesystem(path)
            if not fs.exists(str(path)):
                raise FileNotFoundError(f"Checkpoint file not found: {path}")
            pointer = read_pointer(path)
            if pointer is None:  # a checkpoint Lightning wrote itself (before this plugin was used)
                return TorchCheckpointIO().load_checkpoint(path, map_location=map_location, weights_only=weights_only)
            if pointer.get("namespace") != self.config.namespace:
                raise ValueError(f"{path} points at step {pointer.get('step')} of namespace "
                                 f"{pointer.get('namespace')!r}, but this plugin's namespace is "
                                 f"{self.config.namespace!r}; load it with a TieredCheckpointIO of that namespace")
            step = check_step(pointer["step"])
        return self._load_step(step, map_location, weights_only)

    def _load_step(self, step: int, map_location, weights_only: bool | None) -> dict:
        ck = self._checkpointer()
        box: dict[str, Any] = {_REST: None}
        try:
            ck.load(box, step=step)
        except KeyError:
            box[_REST] = None
        if not isinstance(box[_REST], bytes):
            raise ValueError(f"{checkpoint_id(self.config.namespace, step)} is not a Lightning checkpoint saved by "
                             f"TieredCheckpointIO (it has no {_REST!r} item); load it with tierckpt.torch")
        with torch.serialization.safe_globals([_TensorRef]):
            rest = torch.load(io.BytesIO(box[_REST]), weights_only=weights_only is not False)
        refs = _refs(rest, {})
        if refs:
            tensors = {k: torch.empty(r.shape, dtype=r.dtype) for k, r in refs.items()}
            ck.load({_TENSORS: tensors}, step=step)
            if isinstance(map_location, (str, torch.device)):
                tensors = {k: t.to(map_location) for k, t in tensors.items()}
            rest = _join(rest, tensors)
        return rest

    def remove_checkpoint(self, path) -> None:
        """Removes the pointer at path; the step stays until the tiers' retention drops it."""
        fs = get_filesystem(path)
        if fs.exists(str(path)):
            fs.rm(str(path), recursive=True)
