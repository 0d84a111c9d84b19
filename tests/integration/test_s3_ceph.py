"""The S3 durable tier and `tierckpt sync` against a real S3 implementation:
Ceph's radosgw (Debian's, 16.2 on Debian 12), the session's one-node cluster
(the `rgw` fixture of conftest.py, tests/integration/ceph_rgw.py).

Persist through a real agent (whole PUTs and multipart, both checksum types,
unsigned and signed payloads), wipe the tmpfs, restore byte-identical; boto3
reads what we wrote; a persist whose completions fail aborts its uploads on
RGW; the conditional-write probe finds that RGW enforces
If-None-Match: * on PutObject (no fallback); `tierckpt sync` pushes
checkpoint directories and a fresh instance pulls them. And what RGW 16.2
itself does with the headers moto never checked (docs/s3.md, "Tested
implementations"): it ignores x-amz-checksum-* and x-amz-checksum-type,
enforces If-None-Match on PutObject but not on CompleteMultipartUpload, and
refuses a body whose signed SHA-256 does not match. A missing Ceph fails
these tests (conftest.py's `rgw`), it never skips them.
"""
import json
import shutil
import uuid

import pytest

from conftest import assert_dirs_equal
from conftest_s3 import (MANIFEST, MiB, assert_s3_step_equals, has_key, open_multipart_uploads, s3_agent,
                         step_prefix, wipe_tmpfs_and_restart, write_tree)
from fault_proxy import Fault, FaultProxy
from test_sync import hf_checkpoint, remote_files, run_sync

pytestmark = pytest.mark.ceph

PART = 5 * MiB
# Two objects above the share of 8 connections (multipart), small ones in one PUT, a name that
# exercises SigV4's URI encoding, an empty object.
TREE = {"__0_0.distcp": 24 * MiB + 17, "__1_0.distcp": 24 * MiB, ".metadata": 3000,
        "sub/deeper/a-b_c.d.bin": MiB + 1, "sub/empty": 0}


@pytest.fixture
def rgw_bucket(rgw):
    return rgw.create_bucket(f"tc-{uuid.uuid4().hex[:16]}")


@pytest.mark.parametrize("options", [
    {"multipart_checksum": "composite"},
    {"multipart_checksum": "full_object"},
    {"payload": "signed"},
], ids=["composite", "full_object", "signed"])
def test_persist_then_restore_after_tmpfs_wipe(rgw, rgw_bucket, agents, tmp_path, options):
    prefix = f"runs/{uuid.uuid4().hex[:10]}"
    a = s3_agent(agents, rgw.s3_url(rgw_bucket, prefix, part_size=PART, **options), rgw.keys)
    src = write_tree(tmp_path / "src", TREE)
    a.cli("save", "ceph", 7, "--from", src, "--wait-durable", "--timeout", "180")
    assert a.steps("ceph")[7]["durable"] == "committed"
    s3 = rgw.boto3_client()
    step = step_prefix(prefix, "ceph", 7)
    assert_s3_step_equals(s3, rgw_bucket, step, src)
    for name in ("__0_0.distcp", "__1_0.distcp"):
        etag = s3.head_object(Bucket=rgw_bucket, Key=step + name)["ETag"]
        assert etag.rstrip('"').rsplit("-", 1)[-1].isdigit() and "-" in etag, f"{name} went multipart: {etag}"
    # The manifest's If-None-Match: * is enforced by RGW's PutObject: the probe found it, no fallback.
    assert "s3_conditional_writes_unsupported" not in a.log_text(), a.log_text()[-3000:]

    wipe_tmpfs_and_restart(a)
    st = a.steps("ceph")[7]
    assert st["memory"] != "committed" and st["durable"] == "committed", st
    assert a.cli("verify", "ceph", 7).returncode == 0
    out = tmp_path / "out"
    a.cli("restore", "ceph", 7, "--to", out)
    assert_dirs_equal(src, out)


def test_a_second_agent_cannot_commit_the_same_step_again(rgw, rgw_bucket, agents, tmp_path):
    """Two agents persisting one step with different bytes: the second is refused with a clear
    error and the committed step stays, bytes and manifest (the commit rule of docs/s3.md on a real
    store; the manifest's 412 itself is the conformance suite's SecondCommitIsAlreadyExists)."""
    prefix = f"runs/{uuid.uuid4().hex[:10]}"
    url = rgw.s3_url(rgw_bucket, prefix, part_size=PART, conditional="on")
    first = s3_agent(agents, url, rgw.keys)
    src = write_tree(tmp_path / "src", {"a.bin": 3 * MiB, "b.bin": 1000}, seed=1)
    first.cli("save", "dup", 1, "--from", src, "--wait-durable", "--timeout", "180")
    manifest_key = step_prefix(prefix, "dup", 1) + "_tierckpt_manifest.json"
    s3 = rgw.boto3_client()
    before = s3.get_object(Bucket=rgw_bucket, Key=manifest_key)["Body"].read()

    second = s3_agent(agents, url, rgw.keys)
    other = write_tree(tmp_path / "other", {"a.bin": 3 * MiB, "b.bin": 1000}, seed=2)
    r = second.cli("save", "dup", 1, "--from", other, "--wait-durable", "--timeout", "180", check=False)
    assert r.returncode != 0 and "already holds step dup/1" in r.stderr, (r.returncode, r.stderr)
    assert s3.get_object(Bucket=rgw_bucket, Key=manifest_key)["Body"].read() == before
    out = tmp_path / "out"
    wipe_tmpfs_and_restart(first)
    first.cli("restore", "dup", 1, "--to", out)
    assert_dirs_equal(src, out)


def test_a_persist_whose_completes_always_fail_aborts_its_uploads_and_commits_nothing(
        rgw, rgw_bucket, agents, tmp_path):
    """RGW's AbortMultipartUpload and ListMultipartUploads behind our cleanup: every
    CompleteMultipartUpload answered 200-with-Error by the fault proxy (never forwarded), so the
    persist fails, and neither a manifest nor an open upload stays on RGW."""
    prefix = f"faults/{uuid.uuid4().hex[:10]}"
    with FaultProxy(rgw.endpoint) as proxy:
        a = s3_agent(agents, rgw.s3_url(rgw_bucket, prefix, endpoint=proxy.endpoint, part_size=PART,
                                        max_attempts=2), rgw.keys)
        fault = Fault("error200", method="POST", query="uploadId")
        proxy.add(fault)
        a.writer("--ns", "x", "--step", 1, "--objects", 3, "--size", 12 * MiB + 7, "--ref-dir", tmp_path / "ref",
                 "--seed", 1)
        r = a.cli("persist", "x", 1, "--wait", "--timeout", "300", check=False)
        assert fault.applied >= 2, fault
    assert r.returncode == 1 and "CompleteMultipartUpload" in r.stderr, r.stderr
    s3 = rgw.boto3_client()
    step = step_prefix(prefix, "x", 1)
    assert not has_key(s3, rgw_bucket, step + MANIFEST)
    assert open_multipart_uploads(s3, rgw_bucket, step) == [], "a failed persist left multipart uploads open"


def test_sync_pushes_checkpoint_dirs_and_a_fresh_instance_pulls_them(rgw, rgw_bucket, tmp_path):
    local = tmp_path / "ckpt"
    hf_checkpoint(local, 100)
    hf_checkpoint(local, 200, big=40 * MiB)  # above the 16 MiB threshold: multipart
    prefix = f"job-{uuid.uuid4().hex[:8]}"
    remote = rgw.s3_url(rgw_bucket, prefix, region="us-east-1")
    r = run_sync(rgw, "--local", local, "--remote", remote, "--once")
    assert "pulled 0 file(s) (0 B), pushed 6 (41.5 MiB)" in r.stdout, r.stdout
    client = rgw.boto3_client()
    assert remote_files(client, rgw_bucket, prefix) == sorted(
        f"checkpoint-{s}/{n}" for s in (100, 200) for n in ("trainer_state.json", "optimizer.pt", "model.safetensors"))
    big = client.head_object(Bucket=rgw_bucket, Key=f"{prefix}/checkpoint-200/model.safetensors")
    assert big["ContentLength"] == 40 * MiB and big["ETag"].strip('"').endswith("-3"), big["ETag"]

    fresh = tmp_path / "fresh"
    r = run_sync(rgw, "--local", fresh, "--remote", remote, "--once", "--json")
    report = json.loads(r.stdout)
    assert report["pulled"] == 6 and report["pushed"] == 0, report
    for d in (local, fresh):
        shutil.rmtree(d / ".tierckpt-sync")
    assert_dirs_equal(local, fresh)
    r = run_sync(rgw, "--local", fresh, "--remote", remote, "--once", "--json")
    assert json.loads(r.stdout)["unchanged"] == 6


def test_a_missing_ceph_is_an_error_naming_the_packages_and_setup(tmp_path):
    """What the `rgw` fixture fails with (pytest.fail, never a skip) on a machine without Ceph."""
    from ceph_rgw import CephMissing, ceph_programs  # noqa: PLC0415

    with pytest.raises(CephMissing) as e:
        ceph_programs(search_path=str(tmp_path))
    for word in ("ceph-mon", "ceph-osd", "radosgw", "ceph-common", "scripts/setup.sh"):
        assert word in str(e.value), str(e.value)


# ---- what RGW itself checks (the facts docs/s3.md states) ----------------------------------------

def _signed_put(rgw, bucket, key, signed_body: bytes, sent_body: bytes, headers: dict) -> tuple[int, str]:
    """A PutObject signed by botocore for signed_body (its SHA-256 in x-amz-content-sha256) whose
    request then carries sent_body instead: what a body damaged on the way looks like. Returns the
    HTTP status and the response body."""
    import urllib.error  # noqa: PLC0415
    import urllib.request  # noqa: PLC0415

    from botocore.auth import S3SigV4Auth  # noqa: PLC0415
    from botocore.awsrequest import AWSRequest  # noqa: PLC0415
    from botocore.credentials import Credentials  # noqa: PLC0415

    req = AWSRequest(method="PUT", url=f"{rgw.endpoint}/{bucket}/{key}", data=signed_body, headers=headers)
    S3SigV4Auth(Credentials(rgw.keys.access_key, rgw.keys.secret_key), "s3", "us-east-1").add_auth(req)
    prepared = req.prepare()
    out = urllib.request.Request(prepared.url, data=sent_body, headers=dict(prepared.headers), method="PUT")
    try:
        with urllib.request.urlopen(out, timeout=30) as r:
            return r.status, r.read().decode(errors="replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")


def test_rgw_refuses_a_body_that_does_not_match_its_signed_sha256(rgw, rgw_bucket):
    """Why docs/s3.md recommends payload=signed on RGW: it checks the signed SHA-256."""
    body = b"x" * 4096
    corrupt = b"y" + body[1:]
    status, text = _signed_put(rgw, rgw_bucket, "corrupt", body, corrupt, {})
    assert status == 400 and "XAmzContentSHA256Mismatch" in text, (status, text)
    assert _signed_put(rgw, rgw_bucket, "fine", body, body, {})[0] == 200


def test_rgw_16_ignores_crc32c_headers(rgw, rgw_bucket):
    """RGW 16.2 stores a body whose x-amz-checksum-crc32c is wrong (moto does too): with
    payload=unsigned nothing on the server checks the body; our manifest's XXH3 does at restore."""
    from crc32c_ref import crc32c_b64  # noqa: PLC0415

    if not rgw.version.startswith("16."):
        pytest.xfail(f"pins Ceph 16.2's behaviour; this is Ceph {rgw.version} (update docs/s3.md)")
    body = b"z" * 4096
    status, text = _signed_put(rgw, rgw_bucket, "badcrc", body, body, {"x-amz-checksum-crc32c": crc32c_b64(b"other")})
    assert status == 200, (status, text)
    assert rgw.boto3_client().get_object(Bucket=rgw_bucket, Key="badcrc")["Body"].read() == body


def test_rgw_16_ignores_if_none_match_on_complete_multipart_upload(rgw, rgw_bucket):
    """Why the manifest (the only conditional write) is always one PutObject, never multipart
    (src/store/s3_blob_store.cc): RGW 16.2 completes an upload over an existing key despite
    If-None-Match: *, while it refuses the same header on PutObject with 412."""
    from botocore.exceptions import ClientError  # noqa: PLC0415

    if not rgw.version.startswith("16."):
        pytest.xfail(f"pins Ceph 16.2's behaviour; this is Ceph {rgw.version} (update docs/s3.md)")
    s3 = rgw.boto3_client()
    s3.put_object(Bucket=rgw_bucket, Key="k", Body=b"first")
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket=rgw_bucket, Key="k", Body=b"second", IfNoneMatch="*")
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 412
    up = s3.create_multipart_upload(Bucket=rgw_bucket, Key="k")["UploadId"]
    etag = s3.upload_part(Bucket=rgw_bucket, Key="k", UploadId=up, PartNumber=1, Body=b"third")["ETag"]
    s3.complete_multipart_upload(Bucket=rgw_bucket, Key="k", UploadId=up, IfNoneMatch="*",
                                 MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": etag}]})
    assert s3.get_object(Bucket=rgw_bucket, Key="k")["Body"].read() == b"third"


def test_s3_bench_runs_every_method_against_rgw(tmp_path):
    """bench/s3_bench.py --server ceph (docs/s3.md, "Tests") still runs: a tiny step, its own
    cluster, ours and boto3 both uploading and downloading byte-identical (the bench compares)."""
    import subprocess  # noqa: PLC0415
    import sys  # noqa: PLC0415
    from pathlib import Path  # noqa: PLC0415

    from conftest import BIN_DIR  # noqa: PLC0415

    bench = Path(__file__).resolve().parents[2] / "bench" / "s3_bench.py"
    r = subprocess.run([sys.executable, str(bench), "--server", "ceph", "--size", "16MiB", "--objects", "2",
                        "--methods", "ours,boto3", "--warmup", "0", "--json", "--build-dir", str(BIN_DIR.parent)],
                       capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, f"s3_bench.py --server ceph -> {r.returncode}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    report = json.loads(r.stdout)
    assert report["server"]["ceph_version"] and report["config"]["server"] == "ceph", report["server"]
    for method in ("ours", "boto3"):
        summary = report["results"][method]["summary"]
        assert summary["upload"]["gbps"] > 0 and summary["download"]["gbps"] > 0, (method, summary)
