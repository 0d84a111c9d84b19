"""Ray Train (V2) with tierckpt: report durable steps as Ray checkpoints.

Save with :class:`tierckpt.torch.TieredWriter` (memory every few steps, durable
every N) and report the durable ones::

    import tierckpt.ray
    from tierckpt.torch import CheckpointConfig, TieredWriter, agreed_step

    cfg = CheckpointConfig("my-run", durable=storage_path)   # the RunConfig's storage_path
    fut = dcp.async_save(state, storage_writer=TieredWriter(cfg, step, persist=True))
    tierckpt.ray.report({"loss": loss}, config=cfg, step=step, save=fut)

:func:`report` calls ``ray.train.report`` with ``CheckpointUploadMode.ASYNC``:
training goes on at once, and Ray's upload thread runs :class:`DurableUpload`,
which waits for the save and for the step's durable commit and returns a
``ray.train.Checkpoint`` at the step's durable directory
(``<durable>/<namespace>/step_<10 digits>``: when the namespace is the run's
``name`` and the durable base the run's ``storage_path``, that is inside Ray's
experiment directory, where Ray expects its checkpoints). Ray never copies a
byte: the agent persisted the step.

The Checkpoint is on the run's storage filesystem, as Ray requires of the
checkpoints it manages, so Ray's ``CheckpointConfig(num_to_keep)`` eviction
deletes old durable steps itself, on a filesystem or an S3 base alike (the
memory tier keeps its own retention). docs/ray.md.
"""
from __future__ import annotations

import os
from concurrent.futures import Future

import pyarrow.fs as pafs

from . import agent
from .config import CheckpointConfig
from .torch._ids import check_step

__all__ = ["DurableUpload", "checkpoint_for", "durable_fs_path", "report"]


def _split_base(base: str) -> tuple[str, bool]:
    """(the base as a pyarrow path: no scheme, no options; whether it is on S3)."""
    if base.startswith("s3://"):
        return base[len("s3://"):].split("?", 1)[0].rstrip("/"), True
    if base.startswith("file://"):
        base = base[len("file://"):]
    return os.path.abspath(base), False


def durable_fs_path(config: CheckpointConfig, step: int) -> str:
    """The step's durable directory as a pyarrow path (``bucket/prefix/ns/step_…`` on S3)."""
    config = config.resolve()
    if config.durable is None:
        raise ValueError(f"namespace {config.namespace!r} has no durable base: a Ray checkpoint must point at "
                         "a durable step; give CheckpointConfig(durable=...) the RunConfig's storage_path")
    root, _ = _split_base(os.fspath(config.durable))
    return f"{root}/{config.namespace}/step_{check_step(step):010d}"


def checkpoint_for(config: CheckpointConfig, step: int):
    """The ``ray.train.Checkpoint`` of a durable step (whether or not it is durable yet).

    Inside a Ray Train worker it is on the run's storage filesystem, which Ray requires of the
    checkpoints it manages, and must lie in the run's experiment directory: the namespace is the
    run's ``name`` and the durable base its ``storage_path``. Elsewhere the filesystem comes
    from the base's URL.
    """
    import ray.train

    path = durable_fs_path(config, step)
    storage = None
    try:
        storage = ray.train.get_context().get_storage()
    except Exception:  # not in a Ray Train worker
        storage = None
    if storage is None:
        durable = os.fspath(config.resolve().durable)
        fs, _ = pafs.FileSystem.from_uri(durable.split("?", 1)[0] if durable.startswith("s3://")
                                         else _split_base(durable)[0])
        return ray.train.Checkpoint(path, filesystem=fs)
    experiment = storage.experiment_fs_path.rstrip("/")
    if not path.startswith(experiment + "/"):
        raise ValueError(f"tierckpt step directory {path} is outside Ray's experiment directory {experiment}, where "
                         "Ray keeps the checkpoints it manages: give CheckpointConfig the run's name as namespace and "
                         "its storage_path as durable base (docs/ray.md)")
    return ray.train.Checkpoint(path, filesystem=storage.storage_filesystem)


class DurableUpload:
    """Ray's ``checkpoint_upload_fn`` for a step persisted by the agent: waits, uploads nothing.

    Calling it waits for ``save`` (the ``dcp.async_save`` future, if given), then until the step
    is committed in the durable tier, and returns :func:`checkpoint_for` the step. Idempotent:
    a second call waits for the same things and returns an equal Checkpoint.
    """

    def __init__(self, config: CheckpointConfig, step: int, save: Future | None = None,
                 timeout_s: float = 0.0) -> None:
        self.config = config.resolve()
        self.step = check_step(step)
        self.save = save
        self.timeout_s = timeout_s

    def __call__(self, checkpoint=None, checkpoint_dir_name: str | None = None):
        if self.save is not None:
            self.save.result()
        agent.client(self.config).wait_durable(self.config.namespace, self.step, self.timeout_s)
        return checkpoint_for(self.config, self.step)


def report(metrics: dict, *, config: CheckpointConfig, step: int, save: Future | None = None,
           timeout_s: float = 0.0) -> None:
    """``ray.train.report`` of metrics with the durable step as the checkpoint, uploaded ASYNC.

    Returns at once; Ray registers the checkpoint (and applies ``num_to_keep``) once the step
    is durable. The step must be persisted (``TieredWriter(..., persist=True)`` or the config's
    ``persist_every``): a step that is never persisted is reported as an upload failure.
    """
    import ray.train

    ray.train.report(
        metrics,
        checkpoint=checkpoint_for(config, step),
        checkpoint_upload_mode=ray.train.CheckpointUploadMode.ASYNC,
        checkpoint_upload_fn=DurableUpload(config, step, save, timeout_s),
        delete_local_checkpoint_after_upload=False,
    )
