"""S3 Express One Zone end to end: the real tierckptd and tierckpt (libcurl,
our SigV4 and session signer) against express_stub.ExpressStub, which checks
every request's host, signature (recomputed with botocore), session token and
checksums.

The client addresses "<bucket>.s3express-usw2-az1.us-west-2.tc-stub.test",
which no DNS resolves: the agent runs in its own mount namespace
(`unshare --mount`) with a private /etc/hosts bind-mounted over the real one,
mapping both names to 127.0.0.1. This needs root (or CAP_SYS_ADMIN); without
it the tests fail, saying so. The CLI talks to the agent over its Unix socket
and needs no name resolution.

The stub itself is checked first against boto3, an independent S3 Express
client (its CreateSession and session signing), and must refuse a bad
signature, a wrong checksum and path-style addressing.
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from pathlib import Path

import pytest

from conftest import assert_dirs_equal
from express_stub import BaseKeys, ExpressStub, crc32c, crc32c_b64

MiB = 1 << 20
BUCKET = "tc-bench--usw2-az1--x-s3"
PREFIX = "prefix"
REGION = "us-west-2"
MANIFEST = "_tierckpt_manifest.json"
# Base credentials with an STS-style session token: CreateSession must carry it
# as x-amz-security-token, data requests must not.
BASE = BaseKeys("AKIAEXPRESSBASE00001", "base/Secret+Key/For/Express/Stub000001", "base-sts-token/AbC+dEf=")
# 12 MiB + a bit with 5 MiB parts: parts 1, 2, 3 (5, 5, 2+ MiB). Several small
# objects make the stub's 2-entry listing pages paginate.
TREE = {"big.bin": 12 * MiB + 4321, "sub/small.bin": 10_000, "sub/empty": 0, "a.bin": 1, "b.bin": 777,
        "c.bin": 65_536}


def write_tree(root: Path, tree: dict[str, int]) -> Path:
    for i, (name, size) in enumerate(sorted(tree.items())):
        p = root / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(os.urandom(size) if size > 1 else bytes([i]) * size)
    return root


def step_key(ns: str, step: int, name: str) -> str:
    return f"{PREFIX}/{ns}/step_{step:010d}/{name}"


def durable_url(stub: ExpressStub) -> str:
    return f"s3://{BUCKET}/{PREFIX}?endpoint={stub.endpoint}&region={REGION}&part_size=5MiB&max_attempts=2"


def client_env(base: dict) -> dict:
    """base without the developer's AWS or proxy settings, plus the stub's base keys."""
    env = {k: v for k, v in base.items()
           if not k.startswith("AWS_") and k.lower() not in ("http_proxy", "https_proxy", "all_proxy", "no_proxy")}
    env.update(AWS_CONFIG_FILE="/nonexistent/tierckpt-test-aws-config",
               AWS_SHARED_CREDENTIALS_FILE="/nonexistent/tierckpt-test-aws-credentials",
               AWS_EC2_METADATA_DISABLED="true", no_proxy="*")
    env.update(BASE.env())
    return env


# ---- fixtures ---------------------------------------------------------------------------------

@pytest.fixture
def stub():
    s = ExpressStub(BUCKET, base=BASE, region=REGION, page_size=2).start()
    yield s
    s.stop()


NAMESPACE_WRAPPER = 'mount --bind "$0" /etc/hosts && exec "$@"'


@pytest.fixture
def hosts_file(tmp_path, stub) -> Path:
    """A private hosts file for the stub's names, after checking that a mount
    namespace can use it (fails, never skips, when it cannot)."""
    path = tmp_path / "hosts"
    path.write_text("127.0.0.1 localhost\n" + "".join(f"127.0.0.1 {h}\n" for h in stub.hostnames))
    try:
        r = subprocess.run(["unshare", "--mount", "sh", "-c", NAMESPACE_WRAPPER, str(path),
                            "getent", "hosts", stub.virtual_host], capture_output=True, text=True, timeout=20)
    except FileNotFoundError as e:
        pytest.fail(f"S3 Express tests need unshare(1) to give the agent a private /etc/hosts: {e}", pytrace=False)
    if r.returncode != 0 or "127.0.0.1" not in r.stdout:
        pytest.fail("S3 Express tests need a private mount namespace with its own /etc/hosts "
                    "(`unshare --mount` + `mount --bind`, i.e. root or CAP_SYS_ADMIN) so that "
                    f"{stub.virtual_host} resolves to the stub; it failed with exit {r.returncode}: "
                    f"{r.stderr.strip() or r.stdout.strip()}", pytrace=False)
    return path


def express_agent(agents, stub: ExpressStub, hosts: Path):
    """A tierckptd in its own mount namespace (private /etc/hosts) whose durable
    tier is the stub's directory bucket."""
    a = agents("--memory-budget", "256MiB", start=False)
    a.durable = durable_url(stub)
    a.env = client_env(a.env)
    plain_args = a.args
    a.args = lambda: ["unshare", "--mount", "sh", "-c", NAMESPACE_WRAPPER, str(hosts), *plain_args()]
    return a.start()


def assert_clean(stub: ExpressStub):
    assert stub.violations == [], "the stub saw protocol violations:\n" + "\n".join(stub.violations)


def assert_step_in_stub(stub: ExpressStub, ns: str, step: int, src: Path):
    for name in TREE:
        key = step_key(ns, step, name)
        assert key in stub.objects, f"{key} missing from the stub; it holds {sorted(stub.objects)}"
        assert stub.objects[key] == (src / name).read_bytes(), f"{key} differs from {src / name}"
    manifest = json.loads(stub.objects[step_key(ns, step, MANIFEST)])
    assert {o["name"] for o in manifest["objects"]} == set(TREE)


# ---- the stub against an independent client ----------------------------------------------------

@pytest.fixture
def resolve_stub(monkeypatch, stub):
    """Makes this process (boto3) resolve the stub's names to 127.0.0.1."""
    real = socket.getaddrinfo

    def fake(host, *args, **kwargs):
        return real("127.0.0.1" if host in stub.hostnames else host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", fake)


def boto3_express(stub: ExpressStub, secret: str = BASE.secret_key):
    import boto3  # noqa: PLC0415
    from botocore.config import Config  # noqa: PLC0415
    return boto3.client("s3", region_name=REGION, endpoint_url=stub.endpoint, aws_access_key_id=BASE.access_key,
                        aws_secret_access_key=secret, aws_session_token=BASE.session_token,
                        config=Config(request_checksum_calculation="when_required",
                                      response_checksum_validation="when_required",
                                      retries={"max_attempts": 1}))


def test_crc32c_reference_values():
    assert crc32c(b"123456789") == 0xE3069283  # the CRC-32C check value
    assert crc32c_b64(b"") == "AAAAAA=="
    data = os.urandom(3 * MiB + 5)  # the vectorised path, against the bytewise one
    from express_stub import _crc32c_py  # noqa: PLC0415
    assert crc32c(data) == _crc32c_py(data)


def test_stub_accepts_boto3_and_refuses_bad_requests(stub, resolve_stub):
    from botocore.exceptions import ClientError  # noqa: PLC0415
    s3 = boto3_express(stub)
    body = os.urandom(1000)
    s3.put_object(Bucket=BUCKET, Key="p/a b+c~d.bin", Body=body, ChecksumCRC32C=crc32c_b64(body))
    assert s3.get_object(Bucket=BUCKET, Key="p/a b+c~d.bin", Range="bytes=10-19")["Body"].read() == body[10:20]
    keys = [o["Key"] for page in s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix="p/")
            for o in page.get("Contents", [])]
    assert keys == ["p/a b+c~d.bin"]
    assert_clean(stub)
    assert [r.op for r in stub.requests][:2] == ["CreateSession", "PutObject"]

    with pytest.raises(ClientError) as e:  # a wrong checksum
        s3.put_object(Bucket=BUCKET, Key="p/x", Body=b"abc", ChecksumCRC32C=crc32c_b64(b"abd"))
    assert e.value.response["Error"]["Code"] == "ChecksumCRC32C"
    with pytest.raises(ClientError) as e:  # a wrong base secret: CreateSession's signature
        boto3_express(stub, secret="not-the-secret").head_object(Bucket=BUCKET, Key="p/a b+c~d.bin")
    assert e.value.response["Error"]["Code"] == "Signature"
    import boto3  # noqa: PLC0415
    from botocore.config import Config  # noqa: PLC0415
    path_style = boto3.client("s3", region_name=REGION, endpoint_url=f"http://{stub.zonal_host}:{stub.port}",
                              aws_access_key_id=BASE.access_key, aws_secret_access_key=BASE.secret_key,
                              config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}))
    with pytest.raises(ClientError):  # SigV4 for "s3" to the zonal host, no session: refused
        path_style.list_buckets()
    checks = {v.split("express_stub check ")[1].split(" ")[0] for v in stub.violations}
    assert {"ChecksumCRC32C", "Signature", "Host"} <= checks, stub.violations


# ---- tierckptd + tierckpt ----------------------------------------------------------------------

def test_express_persist_and_restore(agents, stub, hosts_file, tmp_path):
    a = express_agent(agents, stub, hosts_file)
    src = write_tree(tmp_path / "src", TREE)
    a.cli("save", "job", 7, "--from", src, "--wait-durable", "--timeout", "60")
    assert a.steps("job")[7]["durable"] == "committed"
    assert_step_in_stub(stub, "job", 7, src)

    # Wipe the memory tier of this agent, restore from the bucket.
    a.cli("rm", "job", 7)
    assert a.steps("job")[7]["memory"] != "committed"
    out = tmp_path / "out"
    a.cli("restore", "job", 7, "--to", out)
    assert_dirs_equal(src, out)
    assert_clean(stub)

    # One session for the whole life of the agent, created with the base keys.
    sessions = stub.ops("CreateSession")
    assert len(sessions) == 1, [(r.seq, r.op) for r in stub.requests]
    cs = sessions[0]
    assert cs.seq == 0 and cs.status == 200
    assert cs.headers["x-amz-security-token"] == BASE.session_token
    assert cs.headers["x-amz-create-session-mode"] == "ReadWrite"
    assert "x-amz-s3session-token" not in cs.headers
    assert cs.headers["authorization"].startswith(f"AWS4-HMAC-SHA256 Credential={BASE.access_key}/")
    token = next(iter(stub.sessions))
    data = stub.data_requests()
    assert data and all(r.session_token == token for r in data)
    assert not any("x-amz-security-token" in r.headers for r in data)
    assert all(r.headers["host"] == f"{stub.virtual_host}:{stub.port}" for r in stub.requests)
    assert all(f"/{REGION}/s3express/aws4_request" in r.headers["authorization"] for r in stub.requests)

    # big.bin went multipart: parts 1, 2, 3 of 5, 5 and the rest MiB, with CRC32C.
    big = step_key("job", 7, "big.bin")
    assert [r.key for r in stub.ops("CreateMultipartUpload")] == [big]
    assert stub.ops("CreateMultipartUpload")[0].headers["x-amz-checksum-algorithm"] == "CRC32C"
    parts = sorted((int(r.query["partNumber"]), r.body_size) for r in stub.ops("UploadPart") if r.status == 200)
    assert parts == [(1, 5 * MiB), (2, 5 * MiB), (3, TREE["big.bin"] - 10 * MiB)]
    assert all("x-amz-checksum-crc32c" in r.headers for r in stub.ops("UploadPart"))
    completes = stub.ops("CompleteMultipartUpload")
    assert len(completes) == 1 and completes[0].status == 200
    assert completes[0].headers["x-amz-checksum-crc32c"] == crc32c_b64((src / "big.bin").read_bytes())
    assert not stub.uploads, "a multipart upload was left open"
    # Small objects: one PUT each with their CRC32C.
    puts = {r.key for r in stub.ops("PutObject") if r.status == 200}
    assert {step_key("job", 7, n) for n in TREE if n != "big.bin"} <= puts
    # The restore read big.bin with ranged GETs of at most the part size.
    ranged = [r for r in stub.ops("GetObject") if r.key == big]
    assert len(ranged) >= 3 and all("range" in r.headers for r in ranged)
    # Listings were paginated, and pages came in non-lexicographic order.
    assert any("continuation-token" in r.query for r in stub.ops("ListObjectsV2"))
    assert stub.unordered_pages > 0
    assert len({r.connection for r in stub.requests}) < len(stub.requests) / 2, "no keep-alive reuse"

    # A second agent with an empty root restores the step from the bucket:
    # exactly one more CreateSession, and still no violation.
    b = express_agent(agents, stub, hosts_file)
    assert b.steps("job")[7]["durable"] == "committed"
    out2 = tmp_path / "out2"
    b.cli("restore", "job", 7, "--to", out2)
    assert_dirs_equal(src, out2)
    assert len(stub.ops("CreateSession")) == 2

    # Deleting the durable step: the manifest first, then DeleteObjects (with
    # Content-MD5) for the rest; nothing of the step is left in the bucket.
    b.cli("rm", "job", 7, "--durable")
    assert not [k for k in stub.objects if k.startswith(step_key("job", 7, ""))], sorted(stub.objects)
    deletes = stub.ops("DeleteObjects")
    assert deletes and all(r.status == 200 and "content-md5" in r.headers for r in deletes)
    assert_clean(stub)


def test_express_session_refresh(agents, stub, hosts_file, tmp_path):
    # Sessions expire 63 s after they are made; the client refreshes once less
    # than its 60 s margin remains, so each session signs for about 3 s.
    stub.session_lifetime_s = 63
    a = express_agent(agents, stub, hosts_file)
    src = write_tree(tmp_path / "src", {"one.bin": 100_000, "two.bin": 3000})
    a.cli("save", "ref", 1, "--from", src, "--wait-durable", "--timeout", "60")
    first = stub.ops("CreateSession")[0]
    time.sleep(max(0.0, first.time + 5 - time.time()))  # session 1 now has < 59 s left
    a.cli("save", "ref", 2, "--from", src, "--wait-durable", "--timeout", "60")
    a.cli("rm", "ref", 1)
    out = tmp_path / "out"
    a.cli("restore", "ref", 1, "--to", out)
    assert_dirs_equal(src, out)
    assert_clean(stub)

    sessions = stub.ops("CreateSession")
    assert len(sessions) >= 2, "the session was never refreshed"
    assert all(r.status == 200 and r.headers["x-amz-security-token"] == BASE.session_token for r in sessions)
    used = {r.session_token for r in stub.data_requests()}
    assert len(used) >= 2, "data requests kept one session token after a refresh"
    for r in stub.data_requests():
        remaining = stub.sessions[r.session_token].expires - r.time
        # Signed with at least the 60 s margin left (1.5 s for the trip to the stub).
        assert remaining > 58.5, f"#{r.seq} {r.op} used a session with {remaining:.1f}s left"


def test_express_create_session_denied(agents, stub, hosts_file, tmp_path):
    stub.create_session_error = (403, "AccessDenied", "Access Denied")
    a = express_agent(agents, stub, hosts_file)
    src = write_tree(tmp_path / "src", {"w.bin": 5000})
    r = a.cli("save", "deny", 1, "--from", src, "--wait-durable", "--timeout", "30", check=False)
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    for part in ("CreateSession", BUCKET, "AccessDenied"):
        assert part in r.stderr, f"{part!r} not in the error:\n{r.stderr}"
    # `ls` lists the memory tier, says the durable tier could not be listed, exits 1.
    ls = a.cli("ls", "deny", "--json", check=False)
    assert ls.returncode == 1, (ls.stdout, ls.stderr)
    listing = json.loads(ls.stdout)
    assert [(e["step"], e["durable"]) for e in listing["steps"]] == [(1, "failed")], listing
    assert "CreateSession" in listing["durable_error"], listing
    # Nothing reached the bucket: every request was a refused CreateSession.
    assert stub.requests and all(x.op == "CreateSession" and x.status == 403 for x in stub.requests)
    assert stub.objects == {} and stub.uploads == {}
    assert_clean(stub)
