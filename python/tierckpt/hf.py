"""Hugging Face Transformers ``Trainer`` with tierckpt: every ``checkpoint-N`` in memory, durable at a cadence.

    from transformers import Trainer, TrainingArguments
    from tierckpt.hf import TieredCheckpointCallback, resume_checkpoint
    from tierckpt.torch import CheckpointConfig

    cfg = CheckpointConfig("my-run", durable="s3://bucket/ckpt", persist_every=500)   # in global steps
    args = TrainingArguments(output_dir="out", save_steps=50, save_total_limit=2)
    trainer = Trainer(model, args, train_dataset=ds, callbacks=[TieredCheckpointCallback(cfg)])
    trainer.train(resume_from_checkpoint=resume_checkpoint(cfg, args.output_dir))   # None: from scratch

The Trainer writes each checkpoint as it always does (``<output_dir>/checkpoint-N``:
the model's safetensors, ``optimizer.pt``, ``scheduler.pt``, ``rng_state.pth``,
``trainer_state.json``, ...). :class:`TieredCheckpointCallback`'s ``on_save``, which
the Trainer calls right after, makes that directory step N (the global step) of
``config.namespace``: each file one object of the step, named by its path in the
directory, read straight into the node agent's shared memory and committed there
every time, then persisted to the durable tier in the background when N is a
multiple of ``config.persist_every`` (decision 85). A step of an earlier run with
the same number is replaced, as the Trainer overwrites the directory.

:func:`resume_checkpoint` finds the newest committed step and writes it back as
``<output_dir>/checkpoint-N`` from the fastest tier holding a verified copy
(memory, a peer, the durable tier), then returns the path for
``resume_from_checkpoint``. A ``checkpoint-M`` the Trainer was writing when it was
killed is never committed, so it is never picked (the Trainer's own
``resume_from_checkpoint=True`` would pick it, being the newest directory).

Nothing of the Trainer is patched: a Trainer with ``save_total_limit`` still rotates
its directories (the tiers keep ``keep_last``/``durable_keep`` steps), and the
durable copy of a step is a directory laid out like ``checkpoint-N``
(``<durable>/<namespace>/step_<10 digits>/``). docs/frameworks.md.
"""
from __future__ import annotations

import fcntl
import json
import logging
import os
import re
import shutil
from contextlib import contextmanager

try:
    from transformers import TrainerCallback
except ImportError as e:  # pragma: no cover - exercised only where transformers is missing
    raise ImportError("tierckpt.hf needs Hugging Face Transformers (tested with transformers 5.25.0 and "
                      f"accelerate 1.16.0): pip install 'transformers==5.25.0' 'accelerate==1.16.0' ({e})") from e

from . import agent
from ._replace import delete_if_committed
from .config import CheckpointConfig
from .errors import with_context
from .torch import latest_step
from .torch._ids import check_step, checkpoint_id
from .torch._steps import abort_quietly

__all__ = ["TieredCheckpointCallback", "resume_checkpoint", "restore_directory", "save_directory"]

log = logging.getLogger("tierckpt")

MARKER = "_tierckpt_manifest.json"  # written last by a restore: the directory holds the whole, verified step
_CHECKPOINT_DIR = re.compile(r"^checkpoint-(\d+)$")


def _files(directory: str) -> list[tuple[str, str]]:
    """(object name, path) of every regular file under directory, sorted; the restore marker left out."""
    out = []
    for root, dirs, names in os.walk(directory):
        dirs.sort()
        for name in sorted(names):
            path = os.path.join(root, name)
            rel = os.path.relpath(path, directory).replace(os.sep, "/")
            if rel == MARKER or not os.path.isfile(path) or os.path.islink(path):
                continue
            out.append((rel, path))
    return out


def save_directory(config: CheckpointConfig, step: int, directory: str | os.PathLike,
                   persist: bool | None = None) -> None:
    """Commits every file under directory as step of config.namespace (one object per file).

    persist True: persist this step; otherwise the agent persists it when ``config.persist_every``
    (declared to it by ``agent.client``, decision 118) or its own ``--persist-every`` says so.
    A committed step of that number is replaced. Raises (after aborting the step) if a file cannot be stored, naming it.
    """
    config = config.resolve()
    ns, step, directory = config.namespace, check_step(step), os.fspath(directory)
    where = checkpoint_id(ns, step)
    files = _files(directory)
    if not files:
        raise FileNotFoundError(f"{directory} holds no files to save as {where}")
    delete_if_committed(config, step, f"the files of {directory}")
    c = agent.client(config)
    c.begin_save(ns, step)
    try:
        for name, path in files:
            try:
                with open(path, "rb") as f:
                    size = os.fstat(f.fileno()).st_size
                    if size == 0:
                        c.write_object(ns, step, name, b"")
                        continue
                    obj = c.create_object(ns, step, name, size)
                    view, done = obj.data, 0
                    while done < size:
                        n = f.readinto(view[done:])
                        if not n:
                            raise OSError(f"{path} shrank to {done} bytes while it was read (size was {size}); "
                                          "the Trainer must be done writing it before on_save")
                        done += n
                    del view
                    c.seal(obj)
            except Exception as e:
                raise with_context(e, f"storing {path} as object {name!r} of {where} failed: {e}") from e
        c.commit(ns, step, world_size=1, persist=bool(persist), expected_objects=[name for name, _ in files])
    except BaseException:
        abort_quietly(c, ns, step, f"saving {directory}")
        raise


@contextmanager
def _locked(path: str):
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def restore_directory(config: CheckpointConfig, step: int, directory: str | os.PathLike) -> str:
    """Writes step of config.namespace as directory (replacing it), from the fastest verified copy.

    The files are written into a temporary directory beside it, each checked against its checksum
    while copied, then ``_tierckpt_manifest.json``, then renamed into place; a directory that already
    holds that manifest for the same objects is kept as it is. Returns the directory's path.
    """
    config = config.resolve()
    ns, step, directory = config.namespace, check_step(step), os.path.abspath(os.fspath(directory))
    manifest = agent.call(config, lambda c: c.show(ns, step))
    marker = {"namespace": ns, "step": step,
              "objects": {o.name: [o.size, o.checksum] for o in manifest.objects}}
    try:
        with open(os.path.join(directory, MARKER)) as f:
            if json.load(f) == marker and all(o.checksum for o in manifest.objects):
                return directory
    except (OSError, ValueError):
        pass
    parent = os.path.dirname(directory)
    tmp = os.path.join(parent, f".{os.path.basename(directory)}.tierckpt-partial.{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    try:
        for o in manifest.objects:
            path = os.path.join(tmp, *o.name.split("/"))
            os.makedirs(os.path.dirname(path), exist_ok=True)
            view = agent.call(config, lambda c, name=o.name: c.open_verified(ns, step, name, config.read_verify,
                                                                            config.attest_max_age))
            if view.repaired:
                log.warning("tierckpt: %s", view.repaired)
            with open(path, "wb") as f:
                f.write(view.data)
                f.flush()
                os.fsync(f.fileno())
            view.unchanged()
            del view
        with open(os.path.join(tmp, MARKER), "w") as f:
            json.dump(marker, f)
            f.flush()
            os.fsync(f.fileno())
        old = None
        if os.path.lexists(directory):
            old = f"{tmp}.old"
            os.rename(directory, old)
        os.rename(tmp, directory)
        if old:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return directory


def resume_checkpoint(config: CheckpointConfig, output_dir: str | os.PathLike) -> str | None:
    """The path of the newest committed step as ``<output_dir>/checkpoint-N``, restored there; None if none.

    Pass it to ``trainer.train(resume_from_checkpoint=...)``. Every process of the job may call it: the
    processes of a node take turns (a lock file in output_dir) and the later ones find the directory
    restored. Directories ``checkpoint-M`` newer than the step were never committed (a save the
    Trainer did not finish): they are left alone and named in a warning.
    """
    config = config.resolve()
    step = latest_step(config)
    if step is None:
        return None
    output_dir = os.path.abspath(os.fspath(output_dir))
    os.makedirs(output_dir, exist_ok=True)
    with _locked(os.path.join(output_dir, ".tierckpt-resume.lock")):
        target = restore_directory(config, step, os.path.join(output_dir, f"checkpoint-{step}"))
    newer = sorted(n for n in os.listdir(output_dir) if (m := _CHECKPOINT_DIR.match(n)) and int(m.group(1)) > step)
    if newer:
        log.warning("tierckpt: resuming from %s; %s in %s %s never committed (a save that did not finish): the "
                    "Trainer's own resume_from_checkpoint=True would pick %s", checkpoint_id(config.namespace, step),
                    ", ".join(newer), output_dir, "was" if len(newer) == 1 else "were", newer[-1])
    return target


def _barrier() -> None:
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        dist.barrier()


class TieredCheckpointCallback(TrainerCallback):
    """Commits each ``checkpoint-N`` the Trainer saves as step N: ``Trainer(..., callbacks=[this])``.

    Args:
        config: the run's CheckpointConfig (namespace, durable base, ``persist_every`` in global steps).

    In a job of several processes every process waits until all have written their files (a
    barrier), then the world's process 0 saves the directory, which must hold every process's
    files (one node, or an output_dir every node shares, as the Trainer's own resume needs).
    """

    def __init__(self, config: CheckpointConfig) -> None:
        self.config = config.resolve()

    def __repr__(self) -> str:
        return f"TieredCheckpointCallback({self.config.namespace!r})"

    def on_save(self, args, state, control, **kwargs):
        directory = os.path.join(args.output_dir, f"checkpoint-{state.global_step}")
        _barrier()
        if state.is_world_process_zero:
            save_directory(self.config, state.global_step, directory)
        return control
