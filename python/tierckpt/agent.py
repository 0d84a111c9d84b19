"""Connections to the node agent, and the embedded default that starts one.

:func:`client` returns this process's connection to the agent named by a
config (one per process and socket, shared by threads; a forked child makes
its own). When no agent answers and ``auto_start`` is on, it starts a local
``tierckptd`` through ``tierckpt agent start`` — detached (its own session),
so it outlives the trainer — and reuses it from then on. Ranks of one node
that start at once are serialised by a lock file next to the socket; the
agent's own lock on its tmpfs root is the backstop (a second agent on the
same root exits at once), and every caller retries connecting until the
winner answers. A start that fails otherwise (the agent exits at start: a bad
setting such as an unparsable ``TIERCKPT_MEMORY_BUDGET``, an unusable root or
socket path) raises RuntimeError at once with the agent's own error and where
each setting came from. ``tierckpt agent stop`` (or :func:`stop_agent`) ends it.
"""
from __future__ import annotations

import fcntl
import json
import logging
import os
import shutil
import subprocess
import threading
import time
import weakref
from pathlib import Path

from . import _bin, _tierckpt
from .config import CheckpointConfig

__all__ = ["call", "client", "drop_client", "find_binary", "socket_path", "start_agent", "stop_agent"]

log = logging.getLogger("tierckpt")

_lock = threading.Lock()
_clients: dict[tuple[int, str], _tierckpt.Client] = {}
# (socket, namespace, base) → the connection over which the agent accepted that binding.
_bound: dict[tuple[str, str, str], _tierckpt.Client] = {}
# (socket, namespace, policy) -> the connection that declared that policy (decision 118), weakly:
# a connection nothing else holds closes (its mappings with it), as before the declaration.
_declared: dict[tuple[str, str, tuple[int, int, int]], weakref.ref] = {}


def socket_path(config: CheckpointConfig) -> str:
    """The agent socket a (resolved) config names."""
    config = config.resolve()
    return os.fspath(config.socket) if config.socket else _tierckpt.default_socket_path()


def find_binary(name: str) -> str:
    """Path of an installed tierckpt executable (``tierckpt`` or ``tierckptd``).

    Looks at $TIERCKPT_CLI / $TIERCKPT_AGENT_BIN, then the executables this
    package ships (``tierckpt/_bin/``, decision 82: the agent of the same build
    as this package, found however the package was installed), then PATH.
    """
    env = {"tierckpt": "TIERCKPT_CLI", "tierckptd": "TIERCKPT_AGENT_BIN"}[name]
    if os.environ.get(env):
        return os.environ[env]
    shipped = _bin.path_of(name)
    if shipped is not None:
        return str(shipped)
    found = shutil.which(name)
    if found:
        return found
    raise FileNotFoundError(f"cannot find the {name} executable (looked in {_bin.BIN_DIR} and on PATH): "
                            f"reinstall the tierckpt package (pip install .) or set {env}")


def _normalize_durable(url: str) -> str:
    if url.startswith("s3://"):
        # The agent reports s3://bucket/prefix (ObjectStore::Describe): no options, no trailing '/'.
        return url.split("?", 1)[0].rstrip("/")
    path = url[len("file://"):] if url.startswith("file://") else url
    if "://" in path:
        return url
    return os.path.realpath(os.path.expanduser(path))


def _durable_for_agent(url: str) -> str:
    """The base as the agent must see it: file paths absolute from this process's directory."""
    if url.startswith("s3://") or url.startswith("mem://"):
        return url
    return _normalize_durable(url)


def _bind_durable(c: _tierckpt.Client, config: CheckpointConfig) -> None:
    """Has the agent persist config.namespace to config.durable, when set explicitly (decision 72)."""
    if "durable" not in config.explicit or config.durable is None:
        return
    # Keyed by the base as configured: client() runs for every request of a save, and the path
    # is resolved (realpath: a stat per component) only when the binding is new.
    key = (c.socket_path, config.namespace, os.fspath(config.durable))
    with _lock:
        if _bound.get(key) is c:
            return
    base = _durable_for_agent(key[2])
    try:
        c.bind_durable(config.namespace, base)
    except PermissionError as e:
        raise PermissionError(
            f"the agent at {c.socket_path} may not persist namespace {config.namespace!r} to {config.durable} "
            f"(CheckpointConfig.durable): {e}") from e
    except (ValueError, RuntimeError, OSError) as e:
        raise type(e)(f"the agent at {c.socket_path} cannot persist namespace {config.namespace!r} to "
                      f"{config.durable} (CheckpointConfig.durable): {e}") from e
    with _lock:
        _bound[key] = c


def policy_of(config: CheckpointConfig) -> tuple[int, int, int]:
    """(keep_memory, keep_durable, persist_every) as config declares them to the agent; 0 = no opinion."""
    return (config.keep_last or 0, config.durable_keep or 0, config.persist_every or 0)


def _declare_policy(c: _tierckpt.Client, config: CheckpointConfig) -> None:
    """Declares config's persist cadence and retention for its namespace, once per connection (decision 118).

    The agent applies them at every commit of the namespace: no writer computes the cadence or
    sends a Prune. A config that sets none of them declares nothing (the agent's own flags hold).
    """
    policy = policy_of(config)
    if policy == (0, 0, 0):
        return
    key = (c.socket_path, config.namespace, policy)
    with _lock:
        held = _declared.get(key)
        if held is not None and held() is c:
            return
    try:
        c.set_policy(config.namespace, *policy)
    except (ValueError, RuntimeError, OSError) as e:
        raise type(e)(f"the agent at {c.socket_path} refused the policy of namespace {config.namespace!r} "
                      f"(CheckpointConfig keep_last={config.keep_last}, durable_keep={config.durable_keep}, "
                      f"persist_every={config.persist_every}): {e}") from e
    with _lock:
        _declared[key] = weakref.ref(c)


def _agent_start_command(config: CheckpointConfig, socket: str) -> list[str]:
    cmd = [find_binary("tierckpt"), "--socket", socket, "--json", "agent", "start"]
    durable = os.fspath(config.durable) if config.durable else "./checkpoints"
    if "://" not in durable or durable.startswith("file://"):
        durable = _normalize_durable(durable)
    cmd += ["--durable", durable]
    for flag, value in (("--root", config.root), ("--memory-budget", config.memory_budget),
                        ("--keep-last", config.keep_last), ("--durable-keep", config.durable_keep),
                        ("--log-file", config.agent_log)):
        if value is not None:
            cmd += [flag, os.fspath(value) if isinstance(value, os.PathLike) else str(value)]
    tierckptd = None
    try:
        tierckptd = find_binary("tierckptd")
    except FileNotFoundError:
        pass  # `tierckpt agent start` looks next to itself and on PATH too
    if tierckptd:
        cmd += ["--agent-bin", tierckptd]
    return cmd


def start_agent(config: CheckpointConfig) -> dict:
    """Runs ``tierckpt agent start`` for config; returns its JSON report.

    Does not fail when the start loses a race with another starter: the caller
    retries connecting. Raises RuntimeError with the CLI's output when the CLI
    could not run at all.
    """
    config = config.resolve()
    socket = socket_path(config)
    cmd = _agent_start_command(config, socket)
    log.info("tierckpt: no agent answers on %s; starting one: %s", socket, " ".join(cmd))
    try:
        r = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           timeout=config.start_timeout_s + 30)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise RuntimeError(f"running {' '.join(cmd)} failed: {e}") from e
    try:
        report = json.loads(r.stdout) if r.stdout.strip() else {}
    except json.JSONDecodeError:
        report = {}
    report["returncode"] = r.returncode
    report["stderr"] = r.stderr
    return report


_WRITER_ID_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.:@/+=-")


def writer_id() -> str:
    """This job's writer id (docs/python.md, "One writer per step").

    The agent lets only the writer that began a step write, seal, commit or
    abort it, so every rank of one job must present the same id and another
    job, or a new incarnation of this one, another. Without any communication
    between ranks it comes from the launch (derive_writer_id). It is derived
    once per process and pinned in TIERCKPT_WRITER_ID, so that processes this
    one starts afterwards (DCP's async PROCESS executor, which sets its own
    MASTER_PORT) write as the same writer.
    """
    explicit = os.environ.get("TIERCKPT_WRITER_ID")
    if explicit is not None:
        return explicit  # the agent checks it and says what is wrong
    derived = derive_writer_id(os.environ)
    os.environ["TIERCKPT_WRITER_ID"] = derived
    return derived


def derive_writer_id(env) -> str:
    """The writer id the launch environment `env` names: torchrun's run id and
    restart count, else Slurm's job id and restart count, else
    MASTER_ADDR:MASTER_PORT; "" (anonymous: shares steps with other anonymous
    writers, as before writer ids) when none is set."""
    if env.get("TORCHELASTIC_RUN_ID"):
        raw = f"torchelastic:{env['TORCHELASTIC_RUN_ID']}:{env.get('TORCHELASTIC_RESTART_COUNT', '0')}"
    elif env.get("SLURM_JOB_ID"):
        raw = f"slurm:{env['SLURM_JOB_ID']}:{env.get('SLURM_RESTART_COUNT', '0')}"
    elif env.get("MASTER_ADDR") and env.get("MASTER_PORT"):
        raw = f"job:{env['MASTER_ADDR']}:{env['MASTER_PORT']}"
    else:
        return ""
    return "".join(c if c in _WRITER_ID_CHARS else "_" for c in raw)[:128]


def _connect(socket: str) -> _tierckpt.Client:
    return _tierckpt.Client.connect(socket, client_name=f"python:{os.getpid()}", writer_id=writer_id())


# The config fields an embedded start hands to the agent (_agent_start_command).
_START_FIELDS = ("memory_budget", "root", "durable", "keep_last", "durable_keep", "agent_log")


def _lost_to_another_agent(report: dict) -> bool:
    """Whether the agent we started exited because another one, started at the same moment by
    another tool, owns the root or listens on the socket (the agent's two `already exists`
    refusals: src/agent/agent.cc TakeLock, src/wire/unix_socket.cc ListenUnix); then that one
    will answer, and the caller waits for it."""
    said = report.get("stderr", "")
    return "another tierckptd" in said or "an agent already listens" in said


def _start_failure(config: CheckpointConfig, socket: str, report: dict) -> str:
    """Why `tierckpt agent start` failed, in its own words (the agent's error and log tail), with
    the settings it was given and where each came from (a bad TIERCKPT_MEMORY_BUDGET is named)."""
    said = report.get("stderr", "").strip() or "(no output)"
    given = [f"{name}={getattr(config, name)!r} from {config.source(name)}"
             for name in _START_FIELDS if config.source(name) is not None]
    settings = f"\nThe settings it was given: {'; '.join(given)}." if given else ""
    return (f"could not start tierckptd for {socket}: `tierckpt agent start` exited "
            f"{report.get('returncode')}:\n{said}{settings}")


def _start_and_connect(config: CheckpointConfig, socket: str) -> _tierckpt.Client:
    os.makedirs(os.path.dirname(socket) or ".", mode=0o700, exist_ok=True)
    lock_path = socket + ".start.lock"
    with open(lock_path, "a+") as lock_file:
        fcntl.flock(lock_file, fcntl.LOCK_EX)  # one starter per node at a time
        try:
            return _connect(socket)  # another rank started it while we waited
        except ConnectionError:
            pass
        report = start_agent(config)
        if report["returncode"] != 0 and not _lost_to_another_agent(report):
            # The agent did not come up (a bad setting, an unusable root or socket path, or it
            # never answered): say why now instead of waiting start_timeout_s for nothing.
            try:
                return _connect(socket)  # an agent that another starter ran answers after all
            except ConnectionError:
                pass
            raise RuntimeError(_start_failure(config, socket, report))
        deadline = time.monotonic() + config.start_timeout_s
        last: Exception | None = None
        while time.monotonic() < deadline:
            try:
                return _connect(socket)
            except ConnectionError as e:
                last = e
                time.sleep(0.05)
        raise ConnectionError(
            f"started tierckptd for {socket} but it did not answer within {config.start_timeout_s:.0f} s "
            f"(last error: {last}). `tierckpt agent start` exited {report.get('returncode')}: "
            f"{report.get('stderr', '').strip() or '(no output)'}")


def client(config: CheckpointConfig) -> _tierckpt.Client:
    """This process's connection to the agent of config, connecting (and starting one) if needed."""
    config = config.resolve()
    socket = socket_path(config)
    key = (os.getpid(), socket)
    with _lock:
        c = _clients.get(key)
    if c is not None:
        _bind_durable(c, config)  # another namespace of this process may name another base
        _declare_policy(c, config)
        return c
    try:
        c = _connect(socket)
    except ConnectionError as e:
        if not config.auto_start:
            raise ConnectionError(f"{e} (auto_start is off: start an agent with `tierckpt agent start`, "
                                  "or set auto_start=True / TIERCKPT_AUTO_START=1)") from e
        c = _start_and_connect(config, socket)
    _bind_durable(c, config)
    _declare_policy(c, config)
    with _lock:
        return _clients.setdefault(key, c)


def call(config: CheckpointConfig, fn):
    """fn(client(config)), reconnecting once if the cached connection is dead (the agent restarted).

    Only for requests that are safe to repeat on a new connection: reads, and
    the first request of a save (its objects live on the connection).
    """
    c = client(config)
    try:
        return fn(c)
    except ConnectionError:
        drop_client(c)
        return fn(client(config))


def drop_client(c: _tierckpt.Client) -> None:
    """Forgets a cached connection (after the agent went away); the next client() reconnects."""
    with _lock:
        for key in [k for k, v in _bound.items() if v is c]:
            del _bound[key]
        for key in [k for k, v in _declared.items() if v() in (c, None)]:
            del _declared[key]
        for key, value in list(_clients.items()):
            if value is c:
                del _clients[key]


def stop_agent(config: CheckpointConfig, timeout_s: float = 60.0) -> bool:
    """Stops the agent of config (``tierckpt agent stop``); False if none was running."""
    socket = socket_path(config)
    with _lock:
        for key in [k for k in _clients if k[1] == socket]:
            del _clients[key]
        for key in [k for k in _bound if k[0] == socket]:
            del _bound[key]
    r = subprocess.run([find_binary("tierckpt"), "--socket", socket, "--json", "agent", "stop"],
                       stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout_s)
    if r.returncode != 0:
        raise RuntimeError(f"`tierckpt --socket {socket} agent stop` failed ({r.returncode}): "
                           f"{r.stderr.strip() or r.stdout.strip()}")
    try:
        return bool(json.loads(r.stdout).get("stopped"))
    except json.JSONDecodeError:
        return True
