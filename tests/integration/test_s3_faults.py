"""Faults between the agent and S3 (a fault proxy in front of moto).

Every fault ends in a retried success — the step on S3 is byte-identical (read
back with boto3) and restores byte-identical after the tmpfs is wiped — or,
when the faults outlast the retries, in a clear error and NO committed partial
step: no manifest on S3, no multipart upload left open, the step invisible,
and the previous committed step still restores.
"""
import re
import uuid

import pytest

from conftest import assert_dirs_equal
from conftest_s3 import (MANIFEST, MiB, assert_s3_step_equals, bucket, has_key, moto,  # noqa: F401
                         open_multipart_uploads, proxy, s3_agent, step_prefix, wipe_tmpfs_and_restart)
from fault_proxy import Fault

PART = 5 * MiB
OBJECTS = 3            # obj_0.bin .. obj_2.bin
SIZE = 12 * MiB + 7    # each above the 5 MiB part size: 3 parts each
MANIFEST_RE = re.escape(MANIFEST) + "$"


def make_agent(agents, moto, proxy, bucket, **options):
    prefix = f"faults/{uuid.uuid4().hex[:10]}"
    url = moto.s3_url(bucket, prefix, endpoint=proxy.endpoint, part_size=PART, **options)
    return s3_agent(agents, url, moto.keys), prefix


def write_step(agent, ns, step, ref, persist=True):
    args = ["--ns", ns, "--step", step, "--objects", OBJECTS, "--size", SIZE, "--ref-dir", ref,
            "--seed", step]
    if persist:
        args.append("--persist")
    agent.writer(*args)


# Faults during the persist; each must be retried away. Factories: a Fault
# counts its matches, so every test gets fresh ones.
PERSIST_FAULTS = {
    "slowdown_burst_on_parts": lambda: [Fault("slowdown", method="PUT", query="partNumber", first=4)],
    "slowdown_on_manifest_put": lambda: [Fault("slowdown", method="PUT", path=MANIFEST_RE, first=2)],
    "internal_on_create_and_parts": lambda: [Fault("internal", method="POST", query="uploads", first=1),
                                             Fault("internal", method="PUT", first=2)],
    "error200_on_complete": lambda: [Fault("error200", method="POST", query="uploadId", first=2)],
    "error200_padded_on_complete": lambda: [Fault("error200", method="POST", query="uploadId", first=1,
                                                  pad=True)],
    "slow_responses": lambda: [Fault("delay", method="PUT", delay_s=1.0, first=3)],
    "dropped_mid_request_body": lambda: [Fault("drop_request", method="PUT", query="partNumber", first=2)],
    "dropped_mid_response_body": lambda: [Fault("drop_response", method="POST", query="uploadId", first=1,
                                                keep_bytes=20)],
    # Connection resets (TCP RST, issue 42 item 2): the client's send or read fails with ECONNRESET.
    "reset_mid_request_body": lambda: [Fault("reset_request", method="PUT", query="partNumber", first=2)],
    "reset_mid_response_body": lambda: [Fault("reset_response", method="POST", query="uploadId", first=1,
                                              keep_bytes=20)],
    "reset_on_manifest_put": lambda: [Fault("reset_request", method="PUT", path=MANIFEST_RE, first=1)],
}


@pytest.mark.parametrize("name", sorted(PERSIST_FAULTS))
def test_persist_faults_are_retried_to_success(name, moto, proxy, bucket, agents, tmp_path):
    a, prefix = make_agent(agents, moto, proxy, bucket)
    faults = PERSIST_FAULTS[name]()
    proxy.add(*faults)
    ref = tmp_path / "ref"
    write_step(a, "f", 1, ref)
    a.cli("persist", "f", 1, "--wait", "--timeout", "180")
    proxy.clear()
    for f in faults:
        assert f.applied == (f.first or 1), f"fault {f} was applied {f.applied} times; the test did not test it"
    assert_s3_step_equals(moto.boto3_client(), bucket, step_prefix(prefix, "f", 1), ref)
    assert open_multipart_uploads(moto.boto3_client(), bucket, step_prefix(prefix, "f", 1)) == []
    wipe_tmpfs_and_restart(a)
    out = tmp_path / "out"
    a.cli("restore", "f", 1, "--to", out)
    assert_dirs_equal(ref, out)


RESTORE_FAULTS = {
    "dropped_mid_download": lambda: [Fault("drop_response", method="GET", path=r"obj_0\.bin$", first=2)],
    "internal_on_gets": lambda: [Fault("internal", method="GET", path=r"obj_\d\.bin$", first=3)],
    "slowdown_on_manifest_get": lambda: [Fault("slowdown", method="GET", path=MANIFEST_RE, first=2)],
    "slow_downloads": lambda: [Fault("delay", method="GET", delay_s=1.0, first=2)],
    "reset_mid_download": lambda: [Fault("reset_response", method="GET", path=r"obj_0\.bin$", first=2)],
}


@pytest.mark.parametrize("name", sorted(RESTORE_FAULTS))
def test_restore_faults_are_retried_to_success(name, moto, proxy, bucket, agents, tmp_path):
    a, prefix = make_agent(agents, moto, proxy, bucket)
    ref = tmp_path / "ref"
    write_step(a, "r", 2, ref, persist=False)
    a.cli("persist", "r", 2, "--wait", "--timeout", "180")
    wipe_tmpfs_and_restart(a)
    faults = RESTORE_FAULTS[name]()
    proxy.add(*faults)
    out = tmp_path / "out"
    a.cli("restore", "r", 2, "--to", out)
    proxy.clear()
    for f in faults:
        assert f.applied == f.first, f"fault {f} was applied {f.applied} times; the test did not test it"
    assert_dirs_equal(ref, out)


# Faults that never stop: the persist must fail cleanly. max_attempts=2 keeps
# the client's retries short; the agent's persister retries too. The error
# must name the S3 operation, the key and what the server said.
FATAL_FAULTS = {
    "parts_always_internal": (lambda: Fault("internal", method="PUT", query="partNumber"),
                              r"UploadPart \S+/obj_\d\.bin.*(500|InternalError)"),
    "complete_always_error200": (lambda: Fault("error200", method="POST", query="uploadId"),
                                 r"CompleteMultipartUpload \S+/obj_\d\.bin.*InternalError"),
    "manifest_always_slowdown": (lambda: Fault("slowdown", method="PUT", path=MANIFEST_RE),
                                 r"_tierckpt_manifest\.json.*(503|SlowDown)"),
    "parts_always_dropped": (lambda: Fault("drop_request", method="PUT", query="partNumber"),
                             r"UploadPart \S+/obj_\d\.bin"),
}


@pytest.mark.parametrize("name", sorted(FATAL_FAULTS))
def test_faults_outlasting_retries_leave_no_committed_step(name, moto, proxy, bucket, agents, tmp_path):
    a, prefix = make_agent(agents, moto, proxy, bucket, max_attempts=2)
    ref1 = tmp_path / "ref1"
    write_step(a, "x", 1, ref1, persist=False)
    a.cli("persist", "x", 1, "--wait", "--timeout", "180")

    make_fault, reason = FATAL_FAULTS[name]
    fault = make_fault()
    proxy.add(fault)
    write_step(a, "x", 2, tmp_path / "ref2", persist=False)
    r = a.cli("persist", "x", 2, "--wait", "--timeout", "300", check=False)
    proxy.clear()
    assert fault.applied >= 2, f"{fault} applied {fault.applied} times"
    assert r.returncode == 1, f"a persist whose requests always fail succeeded:\n{r.stdout}\n{r.stderr}"
    assert bucket in r.stderr and re.search(reason, r.stderr), r.stderr
    assert a.steps("x")[2]["durable"] == "failed"

    s3 = moto.boto3_client()
    step2 = step_prefix(prefix, "x", 2)
    assert not has_key(s3, bucket, step2 + MANIFEST), "a step whose persist failed has a manifest on S3"
    assert open_multipart_uploads(s3, bucket, step2) == [], "a failed persist left multipart uploads open"

    wipe_tmpfs_and_restart(a)
    steps = a.steps("x")
    assert 2 not in steps and steps[1]["durable"] == "committed", steps
    assert a.cli("restore", "x", 2, "--to", tmp_path / "out2", check=False).returncode == 1
    out1 = tmp_path / "out1"
    a.cli("restore", "x", 1, "--to", out1)
    assert_dirs_equal(ref1, out1)
