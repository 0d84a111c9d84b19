"""tierckpt as an fsspec filesystem: ``tierckpt://<namespace>/<step dir>/<file>``, for torch DCP and torchtitan.

    import torch.distributed.checkpoint as dcp
    dcp.save(state, checkpoint_id="tierckpt://my-run/step-100")     # every rank; no storage_writer
    dcp.load(state, checkpoint_id="tierckpt://my-run/step-100")

    # torchtitan: --checkpoint.folder tierckpt://my-run   (its DCP CheckpointManager)

DCP sends any ``proto://`` checkpoint id that fsspec knows to its FsspecWriter/FsspecReader,
and torchtitan sends a ``://`` checkpoint folder through ``fsspec.core.url_to_fs``; the package
registers this class for ``tierckpt`` (an ``fsspec.specs`` entry point), so neither imports
anything of ours. The agent is found as :class:`~tierckpt.config.CheckpointConfig` finds it
(``TIERCKPT_SOCKET`` and the other ``TIERCKPT_*`` variables, or the config file), with the
namespace taken from the URL; ``persist_every``, ``keep_last`` and ``durable_keep`` apply.

The layout (docs/frameworks.md, "torchtitan and fsspec"):

* ``tierckpt://<namespace>`` is a directory holding the namespace's committed steps.
* ``<namespace>/<dir>``: ``<dir>`` names one step and must end in its step number, after a
  ``-`` or ``_`` or alone (``step-100``, ``step_100``, ``100``); all spellings are the same
  step, listed as ``step-<n>``. Anything else is a ValueError naming the path and this rule.
* ``<namespace>/<dir>/<path>``: one object of that step, named ``<path>``. Objects are
  written once (``wb``): the bytes are held in the writing process until the file is
  closed, then stored as one sealed object of the still uncommitted step. The ranks of a
  node write into one step over their own connections (the agent allows it for one writer
  id: docs/agent.md, "One writer per step").
* The step commits when ``.metadata`` appears: DCP's coordinator writes ``.metadata.tmp``
  (held in its process) and renames it to ``.metadata`` as the last act of a save, after
  every rank's files were written. The rename stores ``.metadata`` and commits the step
  with exactly the files that metadata references (``expected_objects``), so a file missing
  from this node's agent fails the commit instead of committing a step that cannot load.
  A save that never gets there is never listed, never readable, and is dropped by the agent
  when its processes' connections close (decision 98).
* Reads (``rb``) open the committed object through the verified read path (memory, a
  peer, the durable tier); ``ls``/``info``/``exists`` see committed steps only; ``rm`` of a
  step directory deletes the step from memory and the durable tier (torchtitan's
  ``keep_latest_k`` purge).
"""
from __future__ import annotations

import logging
import re
import sys
import threading
from dataclasses import dataclass
from functools import partial

try:
    from fsspec.spec import AbstractFileSystem
except ImportError as e:  # pragma: no cover - exercised only where fsspec is missing
    raise ImportError(f"tierckpt.fsspec needs fsspec (tested with fsspec 2026.9.0): pip install fsspec ({e})") from e

from . import _tierckpt, agent
from ._fsspec_files import ObjectReader, PendingFile
from .config import CheckpointConfig
from .errors import with_context
from .errors import Code, code_of

__all__ = ["TieredFileSystem", "TieredPath", "parse_path", "store_object"]

log = logging.getLogger("tierckpt")

PROTOCOL = "tierckpt"
METADATA = ".metadata"  # DCP's metadata file; its arrival commits the step
METADATA_TMP = ".metadata.tmp"  # what DCP's FileSystemWriter.finish writes first, then renames
_STEP_DIR = re.compile(r"^(?:[A-Za-z0-9._-]*[-_])?([0-9]+)$")
_STEP_RULE = ("each directory under tierckpt://<namespace>/ is one step and its name must end in the step "
              "number, alone or after '-' or '_' (step-100, step_100 or 100)")
_LOADABLE_MEMORY = ("committed", "peer")  # as tierckpt.torch.api: held here or by this node's replica holder


@dataclass(frozen=True)
class TieredPath:
    """A path of the filesystem, taken apart: the namespace ("" for the root), the step (None for a
    namespace or the root), the step directory as spelled, and the object name below it ("")."""

    url: str
    ns: str = ""
    step: int | None = None
    dir_name: str = ""
    name: str = ""

    @property
    def step_dir(self) -> str:
        return f"{self.ns}/{self.dir_name}"


def parse_path(path: str) -> TieredPath:
    """A ``tierckpt://`` URL or a protocol-less path, taken apart; ValueError naming the rule it breaks."""
    stripped = TieredFileSystem._strip_protocol(path)
    url = f"{PROTOCOL}://{stripped}"
    if not stripped:
        return TieredPath(url)
    parts = stripped.split("/")
    if any(part in ("", ".", "..") for part in parts):
        raise ValueError(f"{url}: empty, '.' and '..' path components are not allowed")
    ns = parts[0]
    try:
        _tierckpt.validate_namespace(ns)
    except ValueError as e:
        raise ValueError(f"{url}: {ns!r} is not a namespace: {e}") from None
    if len(parts) == 1:
        return TieredPath(url, ns)
    match = _STEP_DIR.match(parts[1])
    if match is None:
        raise ValueError(f"{url}: {parts[1]!r} is not a step directory: {_STEP_RULE}")
    try:
        step = _tierckpt.parse_step(str(int(match.group(1))))
    except ValueError as e:
        raise ValueError(f"{url}: {parts[1]!r} does not name a valid step: {e}") from None
    return TieredPath(url, ns, step, parts[1], "/".join(parts[2:]))


def _world_size() -> int:
    """The process group's size if torch.distributed is in use (recorded in the manifest), else 1."""
    dist = sys.modules.get("torch.distributed")
    if dist is not None and dist.is_available() and dist.is_initialized():
        return dist.get_world_size()
    return 1



def store_object(config: CheckpointConfig, p: TieredPath, chunks, size: int, exists_hint: str) -> None:
    """Stores the bytes of chunks (size in all) as the sealed object p.name of the uncommitted step p.step.

    exists_hint: how to go on when the name is taken, after "a committed step is never overwritten (".
    """
    c = agent.client(config)
    try:
        if size == 0:
            c.write_object(p.ns, p.step, p.name, b"")
            return
        obj = c.create_object(p.ns, p.step, p.name, size)
        view, done = obj.data, 0
        for chunk in chunks:
            n = len(chunk)
            view[done:done + n] = chunk
            done += n
        view.release()
        c.seal(obj)
    except Exception as e:
        hint = f". A step is written once: a committed step is never overwritten ({exists_hint}" \
            if isinstance(e, FileExistsError) else ""
        raise with_context(e, f"{p.url}: storing {p.name!r} ({size} bytes) in step {p.step} of namespace "
                               f"{p.ns!r} failed: {e}{hint}") from e


class TieredFileSystem(AbstractFileSystem):
    """The ``tierckpt://`` fsspec filesystem (module docstring). Thread-safe.

    Args:
        socket: the agent's socket; None: as CheckpointConfig resolves it (``TIERCKPT_SOCKET``, ...).
    """

    protocol = PROTOCOL
    root_marker = ""

    def __init__(self, socket: str | None = None, **storage_options) -> None:
        super().__init__(**storage_options)
        self._socket = socket
        self._lock = threading.Lock()
        # guarded by _lock: the .metadata.tmp bytes this process wrote, by (ns, step), until renamed
        self._pending: dict[tuple[str, int], bytes] = {}
        # guarded by _lock: files open for writing, by (ns, step, name)
        self._writing: dict[tuple[str, int, str], PendingFile] = {}

    # ---- the agent ----

    def _config(self, ns: str) -> CheckpointConfig:
        return CheckpointConfig(ns, socket=self._socket).resolve()

    def _call(self, ns: str, fn):
        return agent.call(self._config(ns), fn)

    def _steps(self, ns: str) -> dict[int, object]:
        """The loadable committed steps of ns (StepSummary by step)."""
        return {s.step: s for s in self._call(ns, lambda c: c.list(ns))
                if s.ns == ns and (s.memory in _LOADABLE_MEMORY or s.durable == "committed")}

    def _manifest(self, p: TieredPath):
        if p.step not in self._steps(p.ns):
            raise FileNotFoundError(f"{p.url}: step {p.step} of namespace {p.ns!r} is not committed in any tier "
                                    f"(`tierckpt ls {p.ns}` lists what exists)")
        return self._call(p.ns, lambda c: c.show(p.ns, p.step))

    # ---- listing ----

    def ls(self, path, detail=True, **kwargs):
        p = parse_path(path)
        if not p.ns:
            raise ValueError(f"{p.url}: name a namespace (tierckpt://<namespace>); the root is not listed")
        if p.step is None:
            steps = self._steps(p.ns)
            if not steps:
                raise FileNotFoundError(f"{p.url}: namespace {p.ns!r} has no committed step")
            out = [{"name": f"{p.ns}/step-{n}", "type": "directory", "size": s.bytes, "step": n}
                   for n, s in sorted(steps.items())]
        else:
            out = self._children(p, self._manifest(p))
        return out if detail else [e["name"] for e in out]

    def _children(self, p: TieredPath, manifest) -> list[dict]:
        prefix = f"{p.name}/" if p.name else ""
        files, dirs = [], {}
        for o in manifest.objects:
            if o.name == p.name:  # ls of a file lists the file
                return [self._file_info(p, o)]
            if not o.name.startswith(prefix):
                continue
            head, sep, _ = o.name[len(prefix):].partition("/")
            if sep:
                dirs.setdefault(head, 0)
                dirs[head] += o.size
            else:
                files.append(self._file_info(p, o))
        if not files and not dirs:
            raise FileNotFoundError(f"{p.url}: no such file in step {p.step} of namespace {p.ns!r}")
        base = f"{p.step_dir}/{prefix}"
        return files + [{"name": base + d, "type": "directory", "size": n} for d, n in sorted(dirs.items())]

    @staticmethod
    def _file_info(p: TieredPath, o) -> dict:
        return {"name": f"{p.step_dir}/{o.name}", "type": "file", "size": o.size, "checksum": o.checksum}

    def info(self, path, **kwargs):
        p = parse_path(path)
        if not p.ns:
            return {"name": "", "type": "directory", "size": 0}
        if p.step is None:
            steps = self._steps(p.ns)
            if not steps:
                raise FileNotFoundError(f"{p.url}: namespace {p.ns!r} has no committed step")
            return {"name": p.ns, "type": "directory", "size": 0}
        manifest = self._manifest(p)
        if not p.name:
            return {"name": p.step_dir, "type": "directory", "size": manifest.total_bytes, "step": p.step,
                    "created": manifest.created_unix_ms / 1000.0}
        for o in manifest.objects:
            if o.name == p.name:
                return self._file_info(p, o)
        if any(o.name.startswith(p.name + "/") for o in manifest.objects):
            return {"name": f"{p.step_dir}/{p.name}", "type": "directory", "size": 0}
        raise FileNotFoundError(f"{p.url}: no such file in step {p.step} of namespace {p.ns!r}")

    # ---- directories: implicit ----

    def makedirs(self, path, exist_ok=False):
        parse_path(path)  # the path must be one this filesystem can hold; directories are implicit

    def mkdir(self, path, create_parents=True, **kwargs):
        parse_path(path)

    # ---- files ----

    def _open(self, path, mode="rb", block_size=None, autocommit=True, cache_options=None, **kwargs):
        p = parse_path(path)
        if p.step is None or not p.name:
            raise IsADirectoryError(f"{p.url}: a file is tierckpt://<namespace>/<step dir>/<name> ({_STEP_RULE})")
        if mode == "rb":
            if p.step not in self._steps(p.ns):
                raise FileNotFoundError(f"{p.url}: step {p.step} of namespace {p.ns!r} is not committed in any "
                                        f"tier (`tierckpt ls {p.ns}` lists what exists)")
            config = self._config(p.ns)
            try:
                view = agent.call(config, lambda c: c.open_verified(p.ns, p.step, p.name, config.read_verify,
                                                                    config.attest_max_age))
            except Exception as e:
                raise with_context(e, f"{p.url}: reading {p.name!r} of step {p.step} of namespace {p.ns!r} "
                                       f"failed: {e}") from e
            if view.repaired:
                log.warning("tierckpt: %s", view.repaired)
            return ObjectReader(view, p.url)
        if mode in ("wb", "xb"):
            key = (p.ns, p.step, p.name)
            f = PendingFile(p.url, partial(self._store, p))
            with self._lock:
                self._writing[key] = f
            return f
        raise NotImplementedError(f"{p.url}: mode {mode!r} is not supported: files of a step are written once "
                                  "('wb') and read ('rb')")

    def _store(self, p: TieredPath, _url: str, chunks: list[bytes], size: int) -> None:
        """A file opened for writing was closed: hold .metadata.tmp, commit on .metadata, else one object."""
        with self._lock:
            self._writing.pop((p.ns, p.step, p.name), None)
        if p.name == METADATA_TMP:
            with self._lock:
                self._pending[(p.ns, p.step)] = b"".join(chunks)
            return
        if p.name == METADATA:
            self._commit(p, b"".join(chunks))
            return
        store_object(self._config(p.ns), p, chunks, size,
                     "rm its directory first), and the files of an attempt that did not commit stay until that "
                     "attempt's processes exit; save under a new step number")

    def _commit(self, p: TieredPath, data: bytes) -> None:
        """Stores .metadata and commits the step with exactly the files that metadata references."""
        from .torch._safe_unpickle import load_metadata
        from .torch._steps import abort_quietly

        config = self._config(p.ns)
        metadata = load_metadata(data, p.url)
        names = {getattr(info, "relative_path", None) for info in (metadata.storage_data or {}).values()}
        expected = sorted((names - {None}) | {METADATA})
        c = agent.client(config)  # declares config's persist cadence and retention (agent.py)
        try:
            c.write_object(p.ns, p.step, METADATA, data)
            c.commit(p.ns, p.step, world_size=_world_size(), expected_objects=expected)
        except Exception as e:
            abort_quietly(c, p.ns, p.step, f"committing {p.step_dir}")
            hint = ""
            if code_of(e) == Code.FAILED_PRECONDITION:
                hint = (". The step is committed on the agent of the rank that writes .metadata, with every file "
                        "its metadata references: every rank must save through that node's agent (a job across "
                        "nodes saves with tierckpt.torch.TieredWriter)")
            raise with_context(e, f"{p.url}: committing step {p.step} of namespace {p.ns!r} "
                                   f"({len(expected)} files) failed: {e}{hint}") from e
        log.info("tierckpt: committed %s (%d files)", p.url, len(expected))

    def mv(self, path1, path2, recursive=False, maxdepth=None, **kwargs):
        src, dst = parse_path(path1), parse_path(path2)
        if (src.name != METADATA_TMP or dst.name != METADATA or (src.ns, src.step) != (dst.ns, dst.step)):
            raise NotImplementedError(f"renaming {src.url} to {dst.url}: the only rename is <step dir>/"
                                      f"{METADATA_TMP} to {METADATA} of the same step (DCP's commit)")
        with self._lock:
            data = self._pending.pop((src.ns, src.step), None)
        if data is None:
            raise FileNotFoundError(f"{src.url}: not written by this process (it holds {METADATA_TMP} until "
                                    f"the rename that commits the step)")
        self._commit(dst, data)

    def cp_file(self, path1, path2, **kwargs):
        raise NotImplementedError(f"copying {path1} to {path2}: objects are not copied within tierckpt")

    def rm_file(self, path):
        self.rm(path)

    def _rm(self, path):
        self.rm(path)

    def rm(self, path, recursive=False, maxdepth=None):
        if isinstance(path, (list, tuple)):
            for one in path:
                self.rm(one, recursive=recursive, maxdepth=maxdepth)
            return
        p = parse_path(path)
        if not p.ns:
            raise ValueError(f"{p.url}: name a namespace or a step directory to remove")
        if p.step is None:
            if not recursive:
                raise IsADirectoryError(f"{p.url}: a namespace is removed with recursive=True (every step of it)")
            for step in self._steps(p.ns):
                self._delete_step(TieredPath(f"{p.url}/step-{step}", p.ns, step, f"step-{step}"))
            return
        if p.name:
            with self._lock:
                f = self._writing.pop((p.ns, p.step, p.name), None)
                tmp = self._pending.pop((p.ns, p.step), None) if p.name == METADATA_TMP else None
            if f is not None:
                f.discard()  # a write that failed (DCP removes the file it was writing): nothing is stored
                return
            if tmp is not None:
                return
            raise PermissionError(f"{p.url}: the files of a committed step are removed with the step: "
                                  f"rm tierckpt://{p.step_dir} (recursive)")
        self._delete_step(p)

    def _delete_step(self, p: TieredPath) -> None:
        """Deletes committed step p from memory and the durable tier (waiting out a persist in flight)."""
        if p.step not in self._steps(p.ns):
            raise FileNotFoundError(f"{p.url}: step {p.step} of namespace {p.ns!r} is not committed in any tier")
        c = agent.client(self._config(p.ns))
        durable = bool(c.durable_base)
        try:
            c.delete_step(p.ns, p.step, durable_too=durable)
        except Exception as e:  # noqa: BLE001 - only a persist in flight is waited for
            if code_of(e) != Code.FAILED_PRECONDITION or not durable:
                raise with_context(e, f"{p.url}: deleting step {p.step} of namespace {p.ns!r} failed: {e}") from e
            try:
                c.wait_durable(p.ns, p.step, 0.0)
            except Exception:  # noqa: BLE001 - a failed persist leaves nothing durable to wait for
                pass
            c.delete_step(p.ns, p.step, durable_too=True)
