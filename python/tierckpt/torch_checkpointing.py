"""tierckpt as a torch-checkpointing storage backend: ``CheckpointManager`` saves into the node agent's tiers.

    from torch_checkpointing import CheckpointManager
    from tierckpt.torch_checkpointing import TieredStorageConfig

    mgr = CheckpointManager.Config(storage_config=TieredStorageConfig()).build()
    future = mgr.save("tierckpt://my-run/step-100", {"model": model.state_dict(), "optim": optim.state_dict()})
    future.result()                                  # committed in the agent's memory
    mgr.load("tierckpt://my-run/step-100", into={"model": model.state_dict(), "optim": optim.state_dict()})

torch-checkpointing 0.1.1 (Meta, PyPI ``torch-checkpointing``) writes a checkpoint through its
``storage.base_storage.Storage`` interface with a staged-write protocol: every rank writes its files
under ``<parent>/<temp_dir_prefix><name>`` (``tmp_step-100``), all ranks pass a barrier, and rank 0
renames that directory onto the checkpoint id, which the interface makes the commit. This backend maps
it onto tierckpt (docs/frameworks.md, "torch-checkpointing"):

* A checkpoint id is ``tierckpt://<namespace>/<step dir>``, the step directory named as for
  ``tierckpt://`` (tierckpt.fsspec): it ends in the step number (``step-100``, ``step_100``, ``100``).
* The staged directory ``<namespace>/tmp_<step dir>`` is the step while it is written: each file is one
  object of the uncommitted step, stored (and sealed) over the writing process's own connection when
  the file is closed. Nothing of it is listed or readable.
* ``rename(<namespace>/tmp_<step dir>, <namespace>/<step dir>)`` commits the step with every object the
  ranks stored (the agent refuses while one is unsealed), persisting it to the durable tier when the
  step is a multiple of ``persist_every``; retention (``keep_last``, ``durable_keep``) follows. A
  committed step is an occupied destination: the rename raises ``FileExistsError``, as the interface
  asks, and a save to a committed step's id fails at its first file.
* A save that never renames (a rank or the job killed) is never listed, and the agent drops its objects
  when its writers' connections close (decision 98).
* Reads (``stream_read``, ``read``, ``getsize``, ``exists``, ``ls``, ``isdir``) see committed steps only, each
  file read from the fastest tier holding a verified copy (memory, a peer, the durable tier).
  ``rmdir`` of a committed step deletes it from memory and the durable tier; of a staged one, aborts it.

The agent is found as :class:`~tierckpt.config.CheckpointConfig` finds it (``TIERCKPT_SOCKET`` and the
other ``TIERCKPT_*`` variables, or the config file), with the namespace from the id; the async saver's
writer process uses it too. The rules are tierckpt.fsspec's, whose path parsing, reads, listings and
deletion this module reuses.
"""
from __future__ import annotations

import errno
import io
import logging
import os
import threading
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

try:
    from torch_checkpointing.storage.base_storage import ReadArgs, Storage, StorageConfig
except ImportError as e:  # pragma: no cover - exercised only where torch-checkpointing is missing
    raise ImportError("tierckpt.torch_checkpointing needs torch-checkpointing (tested with 0.1.1): "
                      f"pip install --no-deps 'torch-checkpointing==0.1.1' safetensors ({e})") from e

from . import agent
from ._fsspec_files import PendingFile
from .errors import Code, code_of, with_context
from .fsspec import PROTOCOL, TieredFileSystem, TieredPath, _world_size, parse_path, store_object
from .torch._steps import abort_quietly

__all__ = ["TieredStorage", "TieredStorageConfig"]

log = logging.getLogger("tierckpt")

_ID_RULE = ("a torch-checkpointing checkpoint id on tierckpt is tierckpt://<namespace>/<step dir>, the step "
            "directory's name ending in the step number (step-100, step_100 or 100)")


def _url(path) -> str:
    """The path as a ``tierckpt://`` URL: pathlib turns ``tierckpt://ns/x`` into ``tierckpt:/ns/x``."""
    s = os.fspath(path)
    if s.startswith(f"{PROTOCOL}:/") and not s.startswith(f"{PROTOCOL}://"):
        s = f"{PROTOCOL}://{s[len(PROTOCOL) + 2:]}"
    return s


@dataclass
class TieredStorageConfig(StorageConfig):
    """``CheckpointManager.Config(storage_config=TieredStorageConfig())``: the tierckpt backend.

    Args:
        socket: the agent's socket; None: as CheckpointConfig resolves it (``TIERCKPT_SOCKET``, ...).
        temp_dir_prefix: the prefix of the staged directories, which must be torch-checkpointing's
            ``CheckpointWriterConfig.temp_dir_prefix`` (its default, ``tmp_``).
        world_size: recorded in each step's manifest; None: the process group's size when the config
            is made (1 without one).
        writer_id: the job's writer id (docs/agent.md, "One writer per step"); None: this process's
            (``tierckpt.agent.writer_id()``), taken when the config is made and handed to the writer
            processes torch-checkpointing starts, so that every process of the job writes as one writer.

    Picklable: the async saver builds the storage in its writer process from this config.
    """

    socket: str | None = None
    temp_dir_prefix: str = "tmp_"
    world_size: int | None = None
    writer_id: str | None = field(default=None)

    def __post_init__(self) -> None:
        if not self.temp_dir_prefix or "/" in self.temp_dir_prefix:
            raise ValueError(f"temp_dir_prefix {self.temp_dir_prefix!r}: a non-empty directory name prefix "
                             "(torch-checkpointing's CheckpointWriterConfig.temp_dir_prefix, default 'tmp_')")
        if self.world_size is None:
            self.world_size = _world_size()
        if self.writer_id is None:
            self.writer_id = agent.writer_id()

    def create_storage(self) -> "TieredStorage":
        return TieredStorage(self)


class TieredStorage(Storage):
    """The backend (module docstring). Thread-safe: torch-checkpointing writes files from a thread pool."""

    def __init__(self, config: TieredStorageConfig) -> None:
        if config is None:
            raise ValueError("TieredStorage needs a TieredStorageConfig")
        # A writer process started before this config was made in its parent still writes as the job.
        if config.writer_id is not None and "TIERCKPT_WRITER_ID" not in os.environ:
            os.environ["TIERCKPT_WRITER_ID"] = config.writer_id
        self._config = config
        self._fs = TieredFileSystem(socket=config.socket)
        self._lock = threading.Lock()
        # guarded by _lock: the names this process stored in each staged step, by (ns, step)
        self._stored: dict[tuple[str, int], set[str]] = {}

    # ---- paths ----

    def _parse(self, path) -> tuple[TieredPath, bool]:
        """The path taken apart, and whether its step directory is a staged one (``tmp_<step dir>``)."""
        url = _url(path)
        try:
            p = parse_path(url)
        except ValueError as e:
            raise ValueError(f"{e} ({_ID_RULE})") from None
        staged = p.step is not None and p.dir_name.startswith(self._config.temp_dir_prefix) and \
            len(p.dir_name) > len(self._config.temp_dir_prefix)
        return p, staged

    def _in_staged_step(self, path, doing: str) -> TieredPath:
        """A path below a staged step directory, or the error saying why not."""
        p, staged = self._parse(path)
        if p.step is None:
            raise ValueError(f"{p.url}: {doing} outside a step: {_ID_RULE}")
        if not staged:
            prefix = self._config.temp_dir_prefix
            raise PermissionError(
                f"{p.url}: {doing} in {p.step_dir}, which is not a staged directory: a step is written under "
                f"{p.ns}/{prefix}{p.dir_name} and committed by renaming that onto {p.step_dir} (torch-checkpointing's "
                f"CheckpointWriterConfig(write_to_temp_dir=True, temp_dir_prefix={prefix!r}), its default)")
        return p

    def _open_step(self, p: TieredPath) -> bool:
        """Whether step p.step of p.ns is being written in the agent's memory (uncommitted)."""
        return any(s.step == p.step and s.ns == p.ns and s.memory == "writing"
                   for s in self._fs._call(p.ns, lambda c: c.list(p.ns)))

    def _committed(self, p: TieredPath) -> bool:
        return p.step in self._fs._steps(p.ns)

    def remap_path(self, path: Path) -> str:
        return _url(path)

    # ---- writing the staged directory ----

    def stream_write(self, path: Path) -> io.IOBase:
        p = self._in_staged_step(path, "writing a file")
        if not p.name:
            raise IsADirectoryError(f"{p.url}: a file is {p.step_dir}/<name>")
        return PendingFile(p.url, partial(self._store, p))

    def write(self, path: Path, data) -> None:
        p = self._in_staged_step(path, "writing a file")
        if not p.name:
            raise IsADirectoryError(f"{p.url}: a file is {p.step_dir}/<name>")
        chunk = memoryview(data).cast("B")
        self._store(p, p.url, [chunk], len(chunk))

    def _store(self, p: TieredPath, _url_: str, chunks, size: int) -> None:
        store_object(self._fs._config(p.ns), p, chunks, size,
                     f"rmdir tierckpt://{p.ns}/{p.dir_name[len(self._config.temp_dir_prefix):]} first, or save "
                     "under a new step number)")
        with self._lock:
            self._stored.setdefault((p.ns, p.step), set()).add(p.name)

    def mkdir(self, path: Path, recursive: bool = True) -> None:
        self._in_staged_step(path, "making a directory")  # directories are implicit

    def rename(self, src_path: Path, dst_path: Path, is_directory: bool = False,
               background_cleanup: bool = False) -> None:
        src, staged = self._parse(src_path)
        dst, dst_staged = self._parse(dst_path)
        prefix = self._config.temp_dir_prefix
        if (not staged or src.name or dst.name or dst_staged or dst.step is None or src.ns != dst.ns
                or src.dir_name != prefix + dst.dir_name):
            raise NotImplementedError(
                f"renaming {src.url} to {dst.url}: the only rename is a staged step directory onto its own "
                f"step directory (tierckpt://<namespace>/{prefix}<step dir> to tierckpt://<namespace>/<step dir>), "
                "which commits the step")
        self._commit(src, dst)

    def _commit(self, src: TieredPath, dst: TieredPath) -> None:
        if self._committed(dst):
            raise FileExistsError(errno.ENOTEMPTY, f"Refusing to rename {src.url} onto {dst.url}: step {dst.step} "
                                  f"of namespace {dst.ns!r} is committed already (an occupied destination). Delete "
                                  f"it first (storage.rmdir, `tierckpt rm {dst.ns} {dst.step}`) or save under a "
                                  "new step number")
        config = self._fs._config(dst.ns)
        c = agent.client(config)  # declares config's persist cadence and retention (agent.py)
        try:
            # Every object the ranks stored: the agent refuses while one is still unsealed.
            c.commit(dst.ns, dst.step, world_size=self._config.world_size or 0)
        except Exception as e:
            code = code_of(e)
            if code == Code.NOT_FOUND:
                raise with_context(e, f"renaming {src.url} to {dst.url}: nothing was staged there (no file "
                                      f"of step {dst.step} is being written in the agent): {e}") from e
            if code != Code.ALREADY_EXISTS:
                abort_quietly(c, dst.ns, dst.step, f"committing {dst.url}")
            raise with_context(e, f"renaming {src.url} to {dst.url}: committing step {dst.step} of namespace "
                                  f"{dst.ns!r} failed: {e}") from e
        with self._lock:
            self._stored.pop((dst.ns, dst.step), None)
        log.info("tierckpt: committed %s", dst.url)

    # ---- reading committed steps ----

    def stream_read(self, path: Path, read_args: ReadArgs | None = None) -> io.RawIOBase:
        p, staged = self._parse(path)
        if staged:
            raise FileNotFoundError(f"{p.url}: a staged step is not readable; it is read once renamed onto "
                                    f"{p.ns}/{p.dir_name[len(self._config.temp_dir_prefix):]} (committed)")
        return self._fs._open(p.url, "rb")

    def getsize(self, path: Path) -> int:
        p, staged = self._parse(path)
        if staged or not p.name:
            raise FileNotFoundError(f"{p.url}: not a file of a committed step")
        return int(self._fs.info(p.url)["size"])

    def exists(self, path: Path) -> bool:
        p, staged = self._parse(path)
        if not p.ns:
            return False
        if staged:
            if p.name:
                with self._lock:
                    return p.name in self._stored.get((p.ns, p.step), ())
            return self._open_step(p)
        try:
            self._fs.info(p.url)
        except FileNotFoundError:
            return False
        return True

    def isdir(self, path: Path) -> bool:
        p, staged = self._parse(path)
        if staged:
            return not p.name and self._open_step(p)
        try:
            return self._fs.info(p.url)["type"] == "directory"
        except FileNotFoundError:
            return False

    def ls(self, path: Path) -> list[str]:
        p, staged = self._parse(path)
        if staged:
            raise FileNotFoundError(f"{p.url}: a staged step is not listed; it is listed once committed")
        return [name.rsplit("/", 1)[-1] for name in self._fs.ls(p.url, detail=False)]

    # ---- deleting ----

    def delete(self, path: Path) -> None:
        p, _ = self._parse(path)
        if p.step is None or not p.name:
            raise IsADirectoryError(f"{p.url}: not a file; a step directory is removed with rmdir")
        raise PermissionError(f"{p.url}: objects are written once and removed with their step: "
                              f"rmdir tierckpt://{p.step_dir}")

    def rmdir(self, path: Path) -> None:
        p, staged = self._parse(path)
        if p.step is None or p.name:
            raise ValueError(f"{p.url}: rmdir removes one step directory, tierckpt://<namespace>/<step dir>")
        if not staged:
            self._fs._delete_step(p)
            return
        c = agent.client(self._fs._config(p.ns))
        try:
            c.abort(p.ns, p.step)
        except Exception as e:
            raise with_context(e, f"{p.url}: aborting the staged step {p.step} of namespace {p.ns!r} failed: "
                                  f"{e}") from e
        with self._lock:
            self._stored.pop((p.ns, p.step), None)
