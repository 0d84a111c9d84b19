"""A real Ceph RADOS Gateway for tests and benchmarks: a throwaway one-node cluster.

    with RgwCluster() as rgw:
        rgw.endpoint        # "http://127.0.0.1:PORT"
        rgw.keys            # Credentials(access_key, secret_key) of an RGW user made at start
        rgw.create_bucket("b")
        rgw.boto3_client()  # a boto3 S3 client for the gateway (path-style)
        rgw.s3_url("b", "prefix", part_size="5MiB")

The same surface as s3_server.MotoServer (endpoint, keys, boto3_client,
create_bucket, s3_url, stop), so a test parametrized over both reads the same.

What start() runs, without systemd (as the user running the tests: root in CI;
the daemons need no privilege), all below one directory on tmpfs
(/dev/shm/tierckpt-ceph-XXXX, removed at stop):
  1. monmaptool + `ceph-mon --mkfs`: one monitor on a free loopback port (msgr2
     only), cephx off (auth none: nothing outside the machine can reach it);
  2. `ceph osd new` + `ceph-osd --mkfs`: one OSD on memstore (RAM, at most
     memstore_bytes), pools of size 1, the CRUSH failure domain an OSD;
  3. radosgw (beast) on another free loopback port; it creates its pools;
  4. `radosgw-admin user create` with fixed test keys, then a bucket create and
     delete through boto3, which makes RGW's bucket index and data pools, so
     the first test does not pay for them.
Every daemon runs in the foreground (-f) in a session of its own and is
SIGKILLed at stop (nothing of it needs to survive); each also gets SIGKILL from
the kernel when the thread that started it dies (PR_SET_PDEATHSIG), so a
pytest process killed mid-run leaves no daemon behind, and start() removes the
directories such a process left (their owner pid is gone). Paxos and the OSD's
heartbeats are tuned down so that the whole start takes seconds, not tens
(start_seconds holds how long it took).

Errors: CephMissing (a Debian package is not installed: run scripts/setup.sh)
and CephStartError (a daemon did not come up: the message names the step, the
command and the tail of the daemon's log) are plain exceptions for the caller
(a fixture) to turn into a test failure, never a skip.

Debian 12 ships Ceph 16.2 (pacific), Debian 13 18.2 (reef); both are started the
same way.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

from agent_harness import free_ports  # tests/harness: on the path from the conftest and from s3_bench
from s3_server import Credentials, S3Endpoint, import_boto3, isolated_aws_env

_TMPFS = Path("/dev/shm") if Path("/dev/shm").is_dir() else Path(tempfile.gettempdir())
# Which Debian package gives each program (scripts/setup.sh installs them).
PROGRAMS = {"monmaptool": "ceph-base", "ceph-mon": "ceph-mon", "ceph-osd": "ceph-osd", "ceph": "ceph-common",
            "radosgw": "radosgw", "radosgw-admin": "radosgw"}
RGW_KEYS = Credentials("TIERCKPTRGWTESTKEY01", "tierckpt-rgw-test-secret-not-a-real-one-0")


class CephMissing(RuntimeError):
    """A Ceph program is not installed (the Debian packages of scripts/setup.sh)."""


class CephStartError(RuntimeError):
    """A daemon of the cluster did not come up, or a set-up command failed."""


def ceph_programs(search_path: str | None = None) -> dict[str, str]:
    """program -> its path on search_path (default $PATH); CephMissing names every missing one
    and its package."""
    found, missing = {}, []
    for prog, pkg in PROGRAMS.items():
        path = shutil.which(prog, path=search_path)
        if path:
            found[prog] = path
        else:
            missing.append(f"{prog} (Debian package {pkg})")
    if missing:
        raise CephMissing("Ceph is not installed: missing " + ", ".join(missing) + ". Run scripts/setup.sh "
                          "(as root, or with sudo: it installs ceph-mon ceph-osd radosgw ceph-common from Debian)")
    return found


def ceph_version() -> str:
    """`ceph --version`'s version number ("16.2.15"), "" if it cannot be run."""
    try:
        out = subprocess.run(["ceph", "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return ""
    words = out.split()
    return words[2] if len(words) > 2 and words[0] == "ceph" else out.strip()


def _die_with_parent() -> None:
    """preexec_fn: SIGKILL this child when the thread that forked it dies (prctl(2))."""
    import ctypes  # noqa: PLC0415
    pr_set_pdeathsig = 1
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)


def remove_stale_dirs() -> None:
    """Removes the cluster directories of processes that are gone (killed before their stop())."""
    for d in _TMPFS.glob("tierckpt-ceph-*"):
        try:
            owner = int((d / "owner").read_text())
        except (OSError, ValueError):
            continue
        try:
            os.kill(owner, 0)
        except ProcessLookupError:
            shutil.rmtree(d, ignore_errors=True)
        except PermissionError:
            pass


class RgwCluster(S3Endpoint):
    """One monitor, one memstore OSD and one radosgw. Not thread-safe to
    start/stop; boto3_client, create_bucket and s3_url (S3Endpoint) are."""

    # RGW 16.2 ignores the checksums botocore would add by default (docs/s3.md): clients send none.
    BOTO_CONFIG = {"request_checksum_calculation": "when_required", "response_checksum_validation": "when_required"}

    def __init__(self, *, memstore_bytes: int = 4 << 30, log_dir: Path | None = None):
        self.memstore_bytes = memstore_bytes
        self.dir = _TMPFS / f"tierckpt-ceph-{uuid.uuid4().hex[:12]}"
        self.log_dir = Path(log_dir) if log_dir else self.dir / "log"
        self.conf = self.dir / "ceph.conf"
        self.procs: dict[str, subprocess.Popen] = {}
        self.port = 0
        self.mon_port = 0
        self.keys = RGW_KEYS
        self.version = ""
        self.start_seconds = 0.0
        self.steps: dict[str, float] = {}  # step -> seconds it took

    # ---- life cycle ---------------------------------------------------------------
    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> "RgwCluster":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self, timeout: float = 90.0) -> "RgwCluster":
        progs = ceph_programs()
        import_boto3()
        remove_stale_dirs()
        t0 = time.monotonic()
        deadline = t0 + timeout
        try:
            self.version = ceph_version()
            self._write_conf()
            self._step("monitor", lambda: self._start_mon(progs, deadline))
            self._step("osd", lambda: self._start_osd(progs, deadline))
            self._step("rgw", lambda: self._start_rgw(progs, deadline))
            self._step("user", lambda: self._create_user(progs))
            self._step("pools", self._warm_pools)
        except BaseException:
            self.stop()
            raise
        self.start_seconds = time.monotonic() - t0
        return self

    def stop(self) -> None:
        for p in reversed(list(self.procs.values())):
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                pass
        self.procs.clear()
        # The logs stay when log_dir is elsewhere (a pytest tmp dir); the rest is RAM.
        shutil.rmtree(self.dir, ignore_errors=True)

    def log_text(self, name: str, tail: int = 3000) -> str:
        """The end of a daemon's log ("mon.a", "osd.0", "client.rgw") and of its stdout."""
        parts = []
        for p in (self.log_dir / f"{name}.log", self.log_dir / f"{name}.out"):
            try:
                parts.append(f"--- {p}:\n" + p.read_text(errors="replace")[-tail:])
            except OSError:
                pass
        return "\n".join(parts)

    def _step(self, name, fn) -> None:
        t = time.monotonic()
        fn()
        self.steps[name] = time.monotonic() - t

    # ---- the daemons ------------------------------------------------------------
    def _write_conf(self) -> None:
        self.dir.mkdir(mode=0o700)
        (self.dir / "owner").write_text(str(os.getpid()))
        for sub in ("run", "rgw"):
            (self.dir / sub).mkdir()
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.mon_port, self.port = free_ports(2)
        self.fsid = str(uuid.uuid4())
        d, logs = self.dir, self.log_dir
        self.conf.write_text(f"""[global]
fsid = {self.fsid}
mon host = v2:127.0.0.1:{self.mon_port}
ms bind msgr1 = false
# No cephx: the cluster is reachable from loopback only and lives for one test session.
auth cluster required = none
auth service required = none
auth client required = none
# radosgw asks for a secure monitor connection by default, which needs cephx.
ms mon client mode = crc
run dir = {d}/run
admin socket = {d}/run/$name.asok
pid file = {d}/run/$name.pid
log file = {logs}/$name.log
mon data = {d}/$name
osd data = {d}/$name
keyring = {d}/keyring
rgw data = {d}/rgw
# One OSD: pools of one copy, the failure domain the OSD itself, few PGs.
osd pool default size = 1
osd pool default min size = 1
mon allow pool size one = true
mon allow pool delete = true
mon warn on pool no redundancy = false
osd pool default pg num = 8
osd pool default pgp num = 8
osd pool default pg autoscale mode = off
mon max pg per osd = 1000
osd crush chooseleaf type = 0
osd objectstore = memstore
memstore device bytes = {self.memstore_bytes}
# Its mon store is on tmpfs, which the monitor would otherwise count as a disk running full.
mon data avail warn = 1
mon data avail crit = 0
# Seconds, not tens: commit map changes (pool creations) at once.
paxos propose interval = 0.01
paxos min wait = 0.01
mon lease = 1
osd heartbeat interval = 1
osd op num shards = 1
osd op num threads per shard = 2
debug ms = 0

[client.rgw]
rgw frontends = beast endpoint=127.0.0.1:{self.port} tcp_nodelay=1
rgw thread pool size = 64
rgw dns name = 127.0.0.1
rgw enable usage log = false
# Deleted objects' data goes to RGW's garbage collector, by default after 2 hours: within seconds
# here, so that a benchmark deleting each step keeps the memstore OSD from filling up.
rgw gc obj min wait = 1
rgw gc processor period = 2
""")

    def _run(self, argv: list[str], what: str, timeout: float = 60.0) -> str:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
        if r.returncode != 0:
            raise CephStartError(f"{what}: `{' '.join(argv)}` exited with {r.returncode}:\n{r.stdout}\n{r.stderr}")
        return r.stdout

    def _ceph(self, progs, *args, timeout: float = 30.0) -> str:
        return self._run([progs["ceph"], "-c", str(self.conf), "--connect-timeout", "10", *args],
                         f"ceph {' '.join(args)}", timeout=timeout)

    def _daemon(self, name: str, argv: list[str]) -> subprocess.Popen:
        with open(self.log_dir / f"{name}.out", "ab") as out:
            p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                 start_new_session=True, preexec_fn=_die_with_parent)
        self.procs[name] = p
        return p

    def _wait(self, name: str, ready, deadline: float, what: str) -> None:
        while time.monotonic() < deadline:
            if ready():
                return
            p = self.procs.get(name)
            if p is not None and p.poll() is not None:
                raise CephStartError(f"{name} exited with {p.returncode} while {what}:\n{self.log_text(name)}")
            time.sleep(0.05)
        raise CephStartError(f"{name}: timed out {what}:\n{self.log_text(name)}")

    def _start_mon(self, progs, deadline) -> None:
        monmap = self.dir / "monmap"
        self._run([progs["monmaptool"], "--create", "--fsid", self.fsid, "--addv", "a",
                   f"[v2:127.0.0.1:{self.mon_port}]", str(monmap)], "monmaptool --create")
        self._run([progs["ceph-mon"], "-c", str(self.conf), "--mkfs", "-i", "a", "--monmap", str(monmap)],
                  "ceph-mon --mkfs")
        self._daemon("mon.a", [progs["ceph-mon"], "-c", str(self.conf), "-i", "a", "-f"])

        def quorum() -> bool:
            r = subprocess.run([progs["ceph"], "-c", str(self.conf), "--connect-timeout", "2", "mon", "stat"],
                               capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
            return r.returncode == 0 and "quorum" in r.stdout
        self._wait("mon.a", quorum, deadline, "waiting for the monitor's quorum")

    def _start_osd(self, progs, deadline) -> None:
        osd_uuid = str(uuid.uuid4())
        osd_id = self._ceph(progs, "osd", "new", osd_uuid).strip()
        if osd_id != "0":
            raise CephStartError(f"`ceph osd new` gave OSD id {osd_id!r}, expected 0")
        (self.dir / "osd.0").mkdir()
        self._run([progs["ceph-osd"], "-c", str(self.conf), "-i", "0", "--mkfs", "--osd-uuid", osd_uuid],
                  "ceph-osd --mkfs")
        self._daemon("osd.0", [progs["ceph-osd"], "-c", str(self.conf), "-i", "0", "-f"])

        def up() -> bool:
            r = subprocess.run([progs["ceph"], "-c", str(self.conf), "--connect-timeout", "2", "osd", "stat"],
                               capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
            return r.returncode == 0 and "1 up" in r.stdout
        self._wait("osd.0", up, deadline, "waiting for the OSD to be up")

    def _start_rgw(self, progs, deadline) -> None:
        self._daemon("client.rgw", [progs["radosgw"], "-c", str(self.conf), "-n", "client.rgw", "-f"])

        def answers() -> bool:
            try:
                with urllib.request.urlopen(self.endpoint + "/", timeout=2) as r:
                    r.read()
                return True
            except urllib.error.HTTPError:
                return True
            except OSError:
                return False
        self._wait("client.rgw", answers, deadline, f"waiting for radosgw to answer on {self.endpoint}")

    def _create_user(self, progs) -> None:
        self._run([progs["radosgw-admin"], "-c", str(self.conf), "-n", "client.admin", "user", "create",
                   "--uid", "tierckpt-test", "--display-name", "tierckpt test",
                   "--access-key", self.keys.access_key, "--secret-key", self.keys.secret_key],
                  "radosgw-admin user create")

    def _warm_pools(self) -> None:
        # The first bucket and the first object make RGW create its index and data pools:
        # done here once, so that no test's timing includes it.
        s3 = self.boto3_client()
        name = f"warm-{uuid.uuid4().hex[:8]}"
        s3.create_bucket(Bucket=name)
        s3.put_object(Bucket=name, Key="k", Body=b"x")
        s3.delete_object(Bucket=name, Key="k")
        s3.delete_bucket(Bucket=name)

    # ---- clients ----------------------------------------------------------------
    def env(self) -> dict:
        """An environment for a client process of this gateway: isolated AWS settings plus its keys."""
        env = isolated_aws_env()
        env.update(self.keys.env())
        return env


if __name__ == "__main__":  # a quick manual start: prints how long each step took
    with RgwCluster() as c:
        print(f"ceph {c.version}: RGW on {c.endpoint} in {c.start_seconds:.1f} s {c.steps}")
