"""A real S3-compatible server for tests and benchmarks: moto in server mode.

    with MotoServer(part_min_size=5 << 20, max_keys=None, auth=False) as moto:
        moto.endpoint        # "http://127.0.0.1:PORT"
        moto.keys            # Credentials(access_key, secret_key) valid for this server
        moto.create_bucket("b")
        moto.boto3_client()  # a boto3 S3 client for the server (path-style)

`moto_server` (from the Python environment that runs this file: scripts/setup.sh
installs moto[server] into .venv) is started as a subprocess bound to
127.0.0.1 on a port the kernel picks (`-p 0`; the port is read from its
"Running on" line), with its temporary files on tmpfs, and is killed (SIGKILL,
then reaped) at stop, whatever happened.

Server knobs, fixed for the server's life (moto reads them at start):
  part_min_size  S3_UPLOAD_PART_MIN_SIZE: the smallest non-last multipart part
                 (S3's 5 MiB by default; lower it to test multipart cheaply)
  max_keys       MOTO_S3_DEFAULT_MAX_KEYS: the page size of listings whose
                 request gives no max-keys (S3's 1000 by default)
  auth           signature checking. moto checks nothing by default. With
                 auth=True the server starts with INITIAL_NO_AUTH_ACTION_COUNT=N,
                 and the first N requests (unauthenticated) create an IAM user
                 with an s3:* policy, an access key for it, and the buckets
                 named in `buckets`; from then on moto verifies every request's
                 SigV4 signature (with botocore's signer) against that key and
                 its policy. start() checks that a badly signed request is
                 refused, so a test can never pass with checking silently off.
Without auth, `keys` are fixed dummy keys (moto accepts anything).

Errors: MotoMissing (moto not installed: run scripts/setup.sh) and
MotoStartError (the server did not come up; the message holds its log) are
plain exceptions for the caller (a fixture) to turn into a test failure.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass
from pathlib import Path

REGION = "us-east-1"
_RUNNING_RE = re.compile(r"Running on http://127\.0\.0\.1:(\d+)")
_TMPFS = Path("/dev/shm") if Path("/dev/shm").is_dir() else Path(tempfile.gettempdir())


class MotoMissing(RuntimeError):
    """moto_server (or boto3) is not installed in this Python environment."""


class MotoStartError(RuntimeError):
    """moto_server did not answer in time, or its auth set-up failed."""


@dataclass(frozen=True)
class Credentials:
    access_key: str
    secret_key: str

    def env(self) -> dict:
        """The AWS_* variables a client process needs (no session token)."""
        return {"AWS_ACCESS_KEY_ID": self.access_key, "AWS_SECRET_ACCESS_KEY": self.secret_key}


DUMMY_KEYS = Credentials("AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")

_S3_ALL_POLICY = json.dumps({
    "Version": "2012-10-17",
    "Statement": [{"Effect": "Allow", "Action": ["s3:*"], "Resource": "*"}],
})


def moto_server_binary() -> Path:
    """moto_server next to this Python interpreter (the venv's bin/), else on PATH."""
    here = Path(sys.executable).parent / "moto_server"
    if here.is_file() and os.access(here, os.X_OK):
        return here
    found = shutil.which("moto_server")
    if found:
        return Path(found)
    raise MotoMissing(f"moto_server is not installed next to {sys.executable} nor on PATH: run "
                      "scripts/setup.sh (it installs moto[server] and boto3 from requirements-dev.txt "
                      "into .venv) and run the tests with .venv/bin/python")


def import_boto3():
    try:
        import boto3  # noqa: PLC0415  (optional dependency, checked here)
        import botocore.config  # noqa: F401,PLC0415
    except ImportError as e:
        raise MotoMissing(f"boto3 is not installed in {sys.executable} ({e}): run scripts/setup.sh "
                          "(requirements-dev.txt pins boto3)") from e
    return boto3


def isolated_aws_env(base: dict | None = None) -> dict:
    """A copy of base (default os.environ) without any AWS_* setting of the
    developer's, with shared config files pointed at nothing and IMDS off, so a
    client started with it sees only what the caller adds."""
    env = {k: v for k, v in (base if base is not None else os.environ).items()
           if not k.startswith("AWS_")}
    env["AWS_CONFIG_FILE"] = "/nonexistent/tierckpt-test-aws-config"
    env["AWS_SHARED_CREDENTIALS_FILE"] = "/nonexistent/tierckpt-test-aws-credentials"
    env["AWS_EC2_METADATA_DISABLED"] = "true"
    env["AWS_REGION"] = REGION
    return env


class S3Endpoint:
    """Clients of an S3 server a test started (moto here, Ceph RGW in ceph_rgw.py): subclasses set
    ``endpoint`` and ``keys``; BOTO_CONFIG adds to the botocore Config every client gets."""

    BOTO_CONFIG: dict = {}

    def boto3_client(self, service: str = "s3", keys: Credentials | None = None, endpoint: str | None = None,
                     max_attempts: int = 3):
        boto3 = import_boto3()
        from botocore.config import Config  # noqa: PLC0415

        k = keys or self.keys
        cfg = Config(s3={"addressing_style": "path"}, retries={"max_attempts": max_attempts, "mode": "standard"},
                     signature_version="s3v4", **self.BOTO_CONFIG)
        return boto3.session.Session().client(
            service, endpoint_url=endpoint or self.endpoint, region_name=REGION,
            aws_access_key_id=k.access_key, aws_secret_access_key=k.secret_key, config=cfg)

    def create_bucket(self, name: str) -> str:
        self.boto3_client().create_bucket(Bucket=name)
        return name

    def s3_url(self, bucket: str, prefix: str = "", endpoint: str | None = None, **options) -> str:
        """s3://bucket/prefix?endpoint=...&k=v (endpoint default: this server)."""
        query = {"endpoint": endpoint or self.endpoint, **{k: str(v) for k, v in options.items()}}
        path = f"{bucket}/{prefix}" if prefix else bucket
        return f"s3://{path}?" + "&".join(f"{k}={v}" for k, v in query.items())


class MotoServer(S3Endpoint):
    """One moto_server process. Not thread-safe to start/stop; its methods that
    only talk to the server (boto3_client, create_bucket) are."""

    def __init__(self, *, part_min_size: int | None = None, max_keys: int | None = None,
                 auth: bool = False, buckets: tuple[str, ...] = (), log_dir: Path | None = None,
                 extra_env: dict | None = None):
        self.part_min_size = part_min_size
        self.max_keys = max_keys
        self.auth = auth
        self.initial_buckets = tuple(buckets)
        self.extra_env = dict(extra_env or {})
        self._own_log_dir = log_dir is None
        self.log_dir = Path(log_dir) if log_dir else Path(tempfile.mkdtemp(prefix="tierckpt-moto-"))
        self.log_path = self.log_dir / "moto.log"
        self.tmp_dir = _TMPFS / f"tierckpt-moto-{uuid.uuid4().hex[:12]}"
        self.proc: subprocess.Popen | None = None
        self.port = 0
        self.keys = DUMMY_KEYS

    # ---- life cycle ---------------------------------------------------------------
    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> "MotoServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
        self.cleanup_logs()

    def start(self, timeout: float = 60.0) -> "MotoServer":
        binary = moto_server_binary()
        import_boto3()
        self.tmp_dir.mkdir(mode=0o700)
        env = isolated_aws_env()
        env.update(TMPDIR=str(self.tmp_dir), PYTHONUNBUFFERED="1", **self.extra_env)
        if self.part_min_size is not None:
            env["S3_UPLOAD_PART_MIN_SIZE"] = str(self.part_min_size)
        if self.max_keys is not None:
            env["MOTO_S3_DEFAULT_MAX_KEYS"] = str(self.max_keys)
        if self.auth:
            # CreateUser, PutUserPolicy, CreateAccessKey, then one CreateBucket each.
            env["INITIAL_NO_AUTH_ACTION_COUNT"] = str(3 + len(self.initial_buckets))
        with open(self.log_path, "ab") as logf:
            self.proc = subprocess.Popen([str(binary), "-H", "127.0.0.1", "-p", "0"], env=env,
                                         stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        try:
            self._wait_listening(timeout)
            self._wait_answering(timeout)
            if self.auth:
                self._set_up_auth()
            else:
                for b in self.initial_buckets:
                    self.create_bucket(b)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=30)
        shutil.rmtree(self.tmp_dir, ignore_errors=True)

    def cleanup_logs(self) -> None:
        """Removes the log directory if this object made it (log_dir=None)."""
        if self._own_log_dir:
            shutil.rmtree(self.log_dir, ignore_errors=True)

    def log_text(self, tail: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-tail:]
        except OSError:
            return ""

    def _wait_listening(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            m = _RUNNING_RE.search(self.log_text(tail=1 << 16))
            if m:
                self.port = int(m.group(1))
                return
            if self.proc.poll() is not None:
                raise MotoStartError(f"moto_server exited with {self.proc.returncode} at start; its log "
                                     f"{self.log_path}:\n{self.log_text()}")
            time.sleep(0.05)
        raise MotoStartError(f"moto_server printed no 'Running on' line within {timeout:.0f} s; its log "
                             f"{self.log_path}:\n{self.log_text()}")

    def _wait_answering(self, timeout: float) -> None:
        # /moto-api/ is moto's dashboard: it answers without counting as an
        # action (INITIAL_NO_AUTH_ACTION_COUNT counts S3/IAM actions only).
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(self.endpoint + "/moto-api/", timeout=5) as r:
                    r.read()
                return
            except urllib.error.HTTPError:
                return  # any HTTP answer means it serves requests
            except OSError as e:
                last = e
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        raise MotoStartError(f"moto_server on {self.endpoint} did not answer HTTP within {timeout:.0f} s "
                             f"({last}); its log {self.log_path}:\n{self.log_text()}")

    # ---- clients ----------------------------------------------------------------
    # ---- signature checking -----------------------------------------------------
    def _set_up_auth(self) -> None:
        iam = self.boto3_client("iam", keys=DUMMY_KEYS, max_attempts=1)
        user = "tierckpt-test"
        iam.create_user(UserName=user)
        iam.put_user_policy(UserName=user, PolicyName="s3-all", PolicyDocument=_S3_ALL_POLICY)
        key = iam.create_access_key(UserName=user)["AccessKey"]
        self.keys = Credentials(key["AccessKeyId"], key["SecretAccessKey"])
        s3 = self.boto3_client(max_attempts=1)
        for b in self.initial_buckets:
            s3.create_bucket(Bucket=b)
        # From here moto checks signatures: prove it (a bad signature is refused,
        # a good one accepted), so that a test cannot pass with checking off.
        from botocore.exceptions import ClientError  # noqa: PLC0415

        bad = self.boto3_client(keys=Credentials(self.keys.access_key, "not-the-secret"), max_attempts=1)
        try:
            bad.list_buckets()
        except ClientError as e:
            if e.response.get("ResponseMetadata", {}).get("HTTPStatusCode") != 403:
                raise MotoStartError(f"moto_server on {self.endpoint}: a badly signed request got {e} "
                                     "instead of 403") from e
        else:
            raise MotoStartError(f"moto_server on {self.endpoint} accepted a badly signed request: "
                                 "signature checking is off (INITIAL_NO_AUTH_ACTION_COUNT did not take effect)")
        s3.list_buckets()
