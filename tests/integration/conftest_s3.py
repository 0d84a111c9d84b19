"""Fixtures and helpers for the S3 durable-tier integration tests (test_s3_*.py).

Test modules import what they use:

    from conftest_s3 import moto, proxy, bucket, s3_agent, ...  # noqa: F401  (fixtures)

`moto` is one moto_server per test module (s3_server.MotoServer; signature
checking off); `proxy` a FaultProxy in front of it for one test; `bucket` a
fresh bucket on it for one test. `s3_agent(agents, url, keys)` starts a
tierckptd (the `agents` fixture of conftest.py: own root, socket, log) whose
durable tier is the s3:// URL, with the AWS_* environment holding exactly the
given keys (the developer's own AWS settings and files are hidden from it).

A missing moto or boto3 fails the test with "run scripts/setup.sh"; nothing is
skipped.
"""
from __future__ import annotations

import random
import shutil
import signal
import uuid
import zlib
from pathlib import Path

import pytest

from fault_proxy import FaultProxy
from s3_server import Credentials, MotoMissing, MotoServer, MotoStartError, isolated_aws_env

MiB = 1 << 20
MANIFEST = "_tierckpt_manifest.json"


def start_moto(log_dir=None, **kwargs) -> MotoServer:
    """A started MotoServer, or the test fails with why (never a skip). Its log
    goes to log_dir (give a pytest tmp dir to keep it with the test's files)."""
    try:
        return MotoServer(log_dir=log_dir, **kwargs).start()
    except MotoMissing as e:
        pytest.fail(str(e), pytrace=False)
    except MotoStartError as e:
        pytest.fail(f"cannot start moto_server: {e}", pytrace=False)


@pytest.fixture(scope="module")
def moto(tmp_path_factory):
    server = start_moto(log_dir=tmp_path_factory.mktemp("moto"))
    yield server
    server.stop()


@pytest.fixture
def proxy(moto):
    p = FaultProxy(moto.endpoint).start()
    yield p
    p.stop()


def new_bucket(server: MotoServer) -> str:
    return server.create_bucket(f"tc-{uuid.uuid4().hex[:16]}")


@pytest.fixture
def bucket(moto):
    return new_bucket(moto)


def s3_agent(agents, url: str, keys: Credentials, *extra_args, env: dict | None = None, start: bool = True,
             budget: str = "512MiB"):
    """An Agent (conftest.py) persisting to `url`, with only `keys` as AWS credentials."""
    a = agents("--memory-budget", budget, *extra_args, start=False)
    a.durable = url
    a.env = isolated_aws_env(a.env)
    a.env.update(keys.env())
    a.env.update(env or {})
    if start:
        a.start()
    return a


def wipe_tmpfs_and_restart(agent) -> None:
    """SIGKILL the agent, delete its whole tmpfs root, start it again: only the
    durable tier is left."""
    agent.kill(signal.SIGKILL)
    shutil.rmtree(agent.root)
    agent.start()


def step_prefix(prefix: str, ns: str, step: int) -> str:
    """The key prefix of a step: "<prefix>/<ns>/step_<10 digits>/" (prefix may be empty)."""
    base = f"{prefix.strip('/')}/" if prefix.strip("/") else ""
    return f"{base}{ns}/step_{step:010d}/"


def list_keys(client, bucket: str, prefix: str = "") -> list[str]:
    keys = []
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        keys += [o["Key"] for o in page.get("Contents", [])]
    return sorted(keys)


def has_key(client, bucket: str, key: str) -> bool:
    from botocore.exceptions import ClientError  # noqa: PLC0415
    try:
        client.head_object(Bucket=bucket, Key=key)
        return True
    except ClientError as e:
        if e.response.get("ResponseMetadata", {}).get("HTTPStatusCode") == 404:
            return False
        raise


def open_multipart_uploads(client, bucket: str, prefix: str = "") -> list[str]:
    resp = client.list_multipart_uploads(Bucket=bucket, Prefix=prefix)
    return [u["Key"] for u in resp.get("Uploads", [])]


def download_prefix(client, bucket: str, prefix: str, dest: Path) -> list[str]:
    """Every object under prefix, written to dest/<key without prefix>; returns the relative names."""
    names = []
    for key in list_keys(client, bucket, prefix):
        rel = key[len(prefix):]
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        client.download_file(bucket, key, str(target))
        names.append(rel)
    return names


def upload_dir(client, bucket: str, prefix: str, src: Path, manifest: bool = True) -> None:
    """Uploads the files of src under prefix: objects first, then the manifest last."""
    files = sorted(p for p in src.rglob("*") if p.is_file())
    for p in files:
        if p.name != MANIFEST:
            client.upload_file(str(p), bucket, prefix + p.relative_to(src).as_posix())
    if manifest:
        client.upload_file(str(src / MANIFEST), bucket, prefix + MANIFEST)


def assert_s3_step_equals(client, bucket: str, prefix: str, expected: Path) -> None:
    """The step's objects on S3 are exactly the files of `expected` (plus the manifest), byte for byte."""
    keys = {k[len(prefix):] for k in list_keys(client, bucket, prefix)}
    want = {p.relative_to(expected).as_posix() for p in expected.rglob("*") if p.is_file()}
    assert keys == want | {MANIFEST}, f"objects under s3://{bucket}/{prefix}: {sorted(keys)} vs {sorted(want)}"
    for rel in want:
        got = client.get_object(Bucket=bucket, Key=prefix + rel)["Body"].read()
        assert got == (expected / rel).read_bytes(), f"s3://{bucket}/{prefix}{rel} differs from {expected / rel}"


def write_tree(root: Path, files: dict[str, int], seed: int = 1) -> Path:
    """Writes files (name -> size) of deterministic pseudo-random bytes below root."""
    for name, size in files.items():
        p = root / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(random.Random(seed * 1_000_003 + zlib.crc32(name.encode())).randbytes(size))
    return root
