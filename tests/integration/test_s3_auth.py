"""The S3 durable tier against moto with SigV4 signature checking ON: a signing
bug cannot hide. Persist, wipe the tmpfs, restore byte-identical; a wrong
secret key is a clear error; `tierckpt agent start --durable s3://...` works
and never prints the secret."""
import json
import os
import re
import shutil
import signal
import subprocess
import time
import uuid

import pytest

from conftest import AGENT_BIN, CLI_BIN, SHM, assert_dirs_equal
from conftest_s3 import (MiB, Credentials, assert_s3_step_equals, list_keys, s3_agent, start_moto, step_prefix,
                         wipe_tmpfs_and_restart, write_tree)
from s3_server import isolated_aws_env

BUCKET = "tierckpt-signed"


@pytest.fixture(scope="module")
def signed_moto(tmp_path_factory):
    server = start_moto(log_dir=tmp_path_factory.mktemp("moto"), auth=True, buckets=(BUCKET,))
    yield server
    server.stop()


def unique_prefix() -> str:
    return f"runs/{uuid.uuid4().hex[:10]}"


# Names that exercise SigV4's URI encoding: dots, dashes, underscores, a leading
# dot, nested "directories", an empty object; and one object above the default
# 16 MiB multipart threshold, so CreateMultipartUpload / UploadPart /
# CompleteMultipartUpload are signed too.
SIGNED_TREE = {"__0_0.distcp": 20 * MiB + 17, ".metadata": 3000, "sub/deeper/a-b_c.d.bin": MiB + 1,
               "sub/empty": 0}


def test_signed_persist_then_restore_after_tmpfs_wipe(signed_moto, agents, tmp_path):
    prefix = unique_prefix()
    # Endpoint and region from the environment, as the AWS SDKs read them.
    a = s3_agent(agents, f"s3://{BUCKET}/{prefix}", signed_moto.keys,
                 env={"AWS_ENDPOINT_URL_S3": signed_moto.endpoint, "AWS_REGION": "us-east-1"})
    src = write_tree(tmp_path / "src", SIGNED_TREE)
    a.cli("save", "signed", 3, "--from", src, "--wait-durable", "--timeout", "180")
    assert a.steps("signed")[3]["durable"] == "committed"
    s3 = signed_moto.boto3_client()
    assert_s3_step_equals(s3, BUCKET, step_prefix(prefix, "signed", 3), src)

    wipe_tmpfs_and_restart(a)
    st = a.steps("signed")[3]
    assert st["memory"] != "committed" and st["durable"] == "committed", st
    assert a.cli("verify", "signed", 3).returncode == 0
    out = tmp_path / "out"
    a.cli("restore", "signed", 3, "--to", out)
    assert_dirs_equal(src, out)


def wait_ready_or_exit(agent, timeout=20.0):
    """Starts the agent; returns None once it answers, or its exit code if it exits first."""
    agent.start(wait=False)
    deadline = time.time() + timeout
    while time.time() < deadline:
        if agent.proc.poll() is not None:
            return agent.proc.returncode
        if agent.answers():
            return None
        time.sleep(0.1)
    raise AssertionError(f"tierckptd neither answered nor exited within {timeout}s:\n{agent.log_text()}")


CREDENTIALS_ERROR = re.compile(r"403|SignatureDoesNotMatch|InvalidAccessKeyId|credential|signature|denied",
                               re.IGNORECASE)


def test_wrong_secret_key_is_a_clear_error(signed_moto, agents, tmp_path):
    prefix = unique_prefix()
    wrong_secret = "WrongSecret" + uuid.uuid4().hex
    url = signed_moto.s3_url(BUCKET, prefix)
    a = s3_agent(agents, url, Credentials(signed_moto.keys.access_key, wrong_secret), start=False)
    code = wait_ready_or_exit(a)
    if code is not None:
        # The agent checked the bucket at start and refused to run.
        assert code != 0
        message = a.log_text()
    else:
        # The agent runs; the first persist is refused with the reason.
        a.writer("--ns", "bad", "--step", 1, "--objects", 1, "--size", MiB)
        r = a.cli("persist", "bad", 1, "--wait", "--timeout", "120", check=False)
        assert r.returncode == 1, (r.stdout, r.stderr)
        message = r.stderr
        # `ls` still lists the memory tier, reports that the durable tier
        # could not be listed (the same 403), and exits 1.
        ls = a.cli("ls", "bad", "--json", check=False)
        assert ls.returncode == 1, (ls.stdout, ls.stderr)
        listing = json.loads(ls.stdout)
        assert [(e["step"], e["durable"]) for e in listing["steps"]] == [(1, "failed")], listing
        assert CREDENTIALS_ERROR.search(listing["durable_error"]), listing
        assert "durable tier could not be listed" in ls.stderr, ls.stderr
    assert BUCKET in message, message
    assert CREDENTIALS_ERROR.search(message), message
    assert wrong_secret not in message and wrong_secret not in a.log_text(), "the secret key was printed"
    assert list_keys(signed_moto.boto3_client(), BUCKET, prefix) == []


def test_cli_agent_start_with_s3_durable_base(signed_moto, tmp_path):
    """`tierckpt agent start --durable s3://...`: the agent persists there; the
    URL shown has no credentials; `agent stop` stops it."""
    prefix = unique_prefix()
    url = signed_moto.s3_url(BUCKET, prefix)
    sock = tmp_path / "cli.sock"
    root = SHM / f"tierckpt-test-{uuid.uuid4().hex[:12]}"
    env = isolated_aws_env()
    env.update(signed_moto.keys.env())

    def cli(*args, check=True):
        r = subprocess.run([str(CLI_BIN), "--socket", str(sock), *map(str, args)], env=env, capture_output=True,
                           text=True, timeout=120, stdin=subprocess.DEVNULL)
        if check:
            assert r.returncode == 0, f"tierckpt {args} -> {r.returncode}\n{r.stdout}\n{r.stderr}"
        return r

    pid = None
    try:
        r = cli("--json", "agent", "start", "--agent-bin", AGENT_BIN, "--root", root, "--memory-budget", "256MiB",
                "--durable", url, "--log-file", tmp_path / "agent.log")
        started = json.loads(r.stdout)
        pid = started["pid"]
        assert started["durable"].startswith(f"s3://{BUCKET}/{prefix}"), started
        src = write_tree(tmp_path / "src", {"a.bin": 1000, "b/c.bin": 2 * MiB})
        cli("save", "clijob", 1, "--from", src, "--wait-durable", "--timeout", "120")
        assert_s3_step_equals(signed_moto.boto3_client(), BUCKET, step_prefix(prefix, "clijob", 1), src)
        status = cli("agent", "status").stdout
        assert f"s3://{BUCKET}/{prefix}" in status, status
        everything = r.stdout + status + (tmp_path / "agent.log").read_text(errors="replace")
        assert signed_moto.keys.secret_key not in everything, "the secret key was printed"
        cli("agent", "stop")
        pid = None
    finally:
        if pid is not None:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        shutil.rmtree(root, ignore_errors=True)
