"""CheckpointConfig: where a job's checkpoints go and how the agent is found.

Every field may be given three ways. The first that is set wins:

1. the constructor argument (anything but ``None``);
2. an environment variable (``TIERCKPT_<FIELD>``, e.g. ``TIERCKPT_SOCKET``);
3. a key of the config file: ``$TIERCKPT_CONFIG`` if set, else
   ``$XDG_CONFIG_HOME/tierckpt/config.toml`` (``~/.config/...``) if it exists.
   TOML, flat keys named like the fields (``durable = "/mnt/ckpt"``).

then the built-in default. :meth:`CheckpointConfig.resolve` applies this once
and returns a config with every field filled; writers and readers resolve at
construction, so a pickled writer (async_save PROCESS mode) carries the
values its trainer saw. docs/python.md lists every field and its default.
"""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from . import _tierckpt

__all__ = ["CheckpointConfig", "config_file_path"]

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def _as_bool(value: Any, where: str) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError(f"{where}: expected a boolean (1/0, true/false, yes/no, on/off), got {value!r}")


def _as_int(minimum: int) -> Callable[[Any, str], int]:
    def parse(value: Any, where: str) -> int:
        if isinstance(value, bool):
            raise ValueError(f"{where}: expected an integer >= {minimum}, got {value!r}")
        try:
            number = int(str(value).strip()) if not isinstance(value, int) else value
        except ValueError:
            raise ValueError(f"{where}: expected an integer >= {minimum}, got {value!r}") from None
        if number < minimum:
            raise ValueError(f"{where}: expected an integer >= {minimum}, got {number}")
        return number

    return parse


def _as_float(value: Any, where: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{where}: expected a number of seconds, got {value!r}") from None
    if number <= 0:
        raise ValueError(f"{where}: expected a positive number of seconds, got {number}")
    return number


_VERIFY_ALWAYS = {"always"} | _TRUE
_VERIFY_NEVER = {"never"} | _FALSE


def _as_verify_reads(value: Any, where: str) -> bool | str:
    """True ("always"), "attested" or False ("never"): the three read checks (docs/python.md)."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower() if isinstance(value, str) else None
    if text in _VERIFY_ALWAYS:
        return True
    if text in _VERIFY_NEVER:
        return False
    if text == "attested":
        return "attested"
    raise ValueError(f"{where}: expected True or 'always' (re-hash every object, the default), 'attested' "
                     f"(skip the hash when the agent verified the object within attest_max_age seconds) or "
                     f"False or 'never', got {value!r}")


def _as_str(value: Any, where: str) -> str:
    if not isinstance(value, (str, os.PathLike)):
        raise ValueError(f"{where}: expected a string, got {value!r}")
    text = os.fspath(value)
    if not text:
        raise ValueError(f"{where}: must not be empty")
    return text


def _as_namespace(value: Any, where: str) -> str:
    text = _as_str(value, where)
    try:
        _tierckpt.validate_namespace(text)  # the agent's rule (src/common/names.h)
    except ValueError as e:
        raise ValueError(f"{where}: {e}") from None
    return text


# field name -> (parser, default). A default of None means "unset": the agent
# decides (socket, root, budget, retention) or the feature is off.
_FIELDS: dict[str, tuple[Callable[[Any, str], Any], Any]] = {
    "namespace": (_as_namespace, None),
    "world_size": (_as_int(1), None),
    "durable": (_as_str, None),
    "keep_last": (_as_int(1), None),
    "durable_keep": (_as_int(0), None),
    "persist_every": (_as_int(0), 0),
    "socket": (_as_str, None),
    "root": (_as_str, None),
    "memory_budget": (_as_str, None),
    "auto_start": (_as_bool, True),
    "agent_log": (_as_str, None),
    "start_timeout_s": (_as_float, 30.0),
    "files_per_rank": (_as_int(1), 1),
    "verify_reads": (_as_verify_reads, True),
    "attest_max_age": (_as_float, 900.0),
}
# Fields that never come from the environment or a file: they describe one job.
_ARGUMENT_ONLY = {"world_size"}


def config_file_path() -> Path | None:
    """The config file that applies: $TIERCKPT_CONFIG, else the XDG default if it exists."""
    explicit = os.environ.get("TIERCKPT_CONFIG")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    default = Path(base) / "tierckpt" / "config.toml"
    return default if default.is_file() else None


def _read_config_file(path: Path) -> dict[str, Any]:
    try:
        import tomllib  # Python 3.11+
    except ModuleNotFoundError:  # pragma: no cover - Python 3.10
        try:
            import tomli as tomllib  # type: ignore[no-redef]
        except ModuleNotFoundError:
            raise RuntimeError(f"reading the tierckpt config file {path} needs Python 3.11 or the "
                               "'tomli' package; pip install tomli, or unset TIERCKPT_CONFIG") from None
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except FileNotFoundError:
        raise FileNotFoundError(f"tierckpt config file {path} (from TIERCKPT_CONFIG) does not exist") from None
    except tomllib.TOMLDecodeError as e:
        raise ValueError(f"tierckpt config file {path} is not valid TOML: {e}") from None
    unknown = sorted(set(data) - (set(_FIELDS) - _ARGUMENT_ONLY))
    if unknown:
        raise ValueError(f"tierckpt config file {path}: unknown key(s) {', '.join(unknown)}; "
                         f"known keys: {', '.join(sorted(set(_FIELDS) - _ARGUMENT_ONLY))}")
    return data


@dataclass(frozen=True)
class CheckpointConfig:
    """Configuration of one job's checkpoints (see the module docstring for precedence).

    Attributes:
        namespace: the job's checkpoint space, ``[A-Za-z0-9_.-]{1,128}``. Env ``TIERCKPT_NAMESPACE``.
        world_size: number of ranks expected in every save; ``None`` takes the process group's size.
            A save whose group has another size fails. Argument only.
        durable: durable tier base: ``file:///path``, a plain path, or ``s3://bucket/prefix`` (options
            after ``?``, credentials and endpoint from the AWS environment: docs/s3.md). Used to
            start an embedded agent (default ``./checkpoints`` there). Set explicitly (argument,
            env or config file), the namespace persists there on any agent: its default base, or
            one its ``--durable-allow`` patterns allow (``PermissionError`` otherwise; docs/agent.md
            "Per-job durable bases"). Env ``TIERCKPT_DURABLE``.
        keep_last: committed steps kept in memory for this namespace (the smaller of this and the
            agent's ``--keep-last`` holds); ``None`` leaves the agent's ``--keep-last`` (3). Env
            ``TIERCKPT_KEEP_LAST``.
        durable_keep: durable steps kept for this namespace (the smaller of this and the agent's
            ``--durable-keep`` holds); ``None`` or 0 leaves the agent's ``--durable-keep`` (0 = all).
            Env ``TIERCKPT_DURABLE_KEEP``.
        persist_every: the agent also persists steps whose number is a multiple of N (0 = only when a
            writer is built with ``persist=True``, or on the agent's ``--persist-every``). Env
            ``TIERCKPT_PERSIST_EVERY``. These three are the namespace's policy: ``agent.client``
            declares them to the agent, which applies them at every commit (decision 118); every
            writer of a namespace must declare the same.
        socket: the agent's Unix socket; ``None`` = ``$TIERCKPT_SOCKET``, else
            ``$XDG_RUNTIME_DIR/tierckpt/agent.sock``, else ``/run/tierckpt/agent.sock`` for root,
            else ``/tmp/tierckpt-<uid>/agent.sock``.
        root: tmpfs root for an embedded agent (agent default ``/dev/shm/tierckpt-<uid>``).
            Env ``TIERCKPT_ROOT``.
        memory_budget: memory budget of an embedded agent: bytes, ``8GiB`` or ``25%`` of RAM
            (agent default ``25%``). Env ``TIERCKPT_MEMORY_BUDGET``.
        auto_start: start a local agent when none answers on the socket. Env ``TIERCKPT_AUTO_START``.
        agent_log: log file of an embedded agent (default ``<root>/agent.log``, or
            ``/tmp/tierckpt-<uid>/agent.log``). Env ``TIERCKPT_AGENT_LOG``.
        start_timeout_s: how long to wait for a started agent to answer. Env ``TIERCKPT_START_TIMEOUT_S``.
        files_per_rank: data objects each rank writes per save; more objects are hashed in parallel
            by the agent. Env ``TIERCKPT_FILES_PER_RANK``.
        verify_reads: how a load checks each object before using it. ``True`` or ``"always"``
            (default): the client re-hashes every object. ``"attested"``: it skips the hash when the
            agent verified the object's bytes at most ``attest_max_age`` seconds ago (its hash after
            the save, a restore, its periodic scrub: ``tierckptd --scrub-interval``) and re-hashes
            otherwise; a bit flip at rest younger than that check is loaded unnoticed.
            ``False`` or ``"never"``: no check. Resolves to ``True``, ``"attested"`` or ``False``.
            Env ``TIERCKPT_VERIFY_READS``.
        attest_max_age: seconds; the oldest agent verification ``verify_reads="attested"`` trusts
            (default 900). Env ``TIERCKPT_ATTEST_MAX_AGE``.
    """

    namespace: str | None = None
    world_size: int | None = None
    durable: str | os.PathLike | None = None
    keep_last: int | None = None
    durable_keep: int | None = None
    persist_every: int | None = None
    socket: str | os.PathLike | None = None
    root: str | os.PathLike | None = None
    memory_budget: str | None = None
    auto_start: bool | None = None
    agent_log: str | os.PathLike | None = None
    start_timeout_s: float | None = None
    files_per_rank: int | None = None
    verify_reads: bool | str | None = None
    attest_max_age: float | None = None
    # Which fields were given as arguments (filled by resolve()); not compared.
    explicit: frozenset[str] = field(default=frozenset(), compare=False, repr=False)
    # (field, where its value came from) for every field not left at its default, in the words
    # resolve() uses in its errors ("environment variable TIERCKPT_MEMORY_BUDGET"); not compared.
    sources: tuple[tuple[str, str], ...] = field(default=(), compare=False, repr=False)

    def resolve(self) -> "CheckpointConfig":
        """A copy with every field resolved (argument > environment > config file > default).

        Raises ValueError naming the field and where its bad value came from, and
        ValueError when no namespace is given anywhere.
        """
        if self.explicit:  # already resolved
            return self
        file_path = config_file_path()
        file_values = _read_config_file(file_path) if file_path is not None else {}
        values: dict[str, Any] = {}
        explicit = set()
        sources = []
        for name, (parse, default) in _FIELDS.items():
            given = getattr(self, name)
            env_name = "TIERCKPT_" + name.upper()
            if given is not None:
                where = f"CheckpointConfig.{name}"
                explicit.add(name)
            elif name not in _ARGUMENT_ONLY and os.environ.get(env_name):
                given, where = os.environ[env_name], f"environment variable {env_name}"
            elif name not in _ARGUMENT_ONLY and name in file_values:
                given, where = file_values[name], f"{file_path}: key {name}"
            else:
                values[name] = default
                continue
            values[name] = parse(given, where)
            sources.append((name, where))
        if values["namespace"] is None:
            raise ValueError("CheckpointConfig needs a namespace: pass namespace=..., or set "
                             "TIERCKPT_NAMESPACE, or a 'namespace' key in the config file")
        explicit.add("_resolved")
        return dataclasses.replace(self, explicit=frozenset(explicit), sources=tuple(sources), **values)

    def source(self, name: str) -> str | None:
        """Where the resolved field `name` came from ("environment variable TIERCKPT_ROOT",
        "CheckpointConfig.root", "<file>: key root"); None for a default."""
        return dict(self.sources).get(name)

    @property
    def resolved(self) -> bool:
        return bool(self.explicit)

    @property
    def read_verify(self) -> str:
        """verify_reads as the client's mode name: "always", "attested" or "never"."""
        if self.verify_reads == "attested":
            return "attested"
        return "never" if self.verify_reads is False else "always"
