"""`tierckpt sync --once` against a real moto server (and a filesystem remote).

The CLI process gets only the moto server's keys (an isolated AWS
environment). boto3 is the independent client that checks what landed in the
bucket and puts files there for the pull.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid

import pytest

from conftest import CLI_BIN, assert_dirs_equal
from conftest_s3 import MiB, bucket, list_keys, moto  # noqa: F401
from s3_server import isolated_aws_env


def run_sync(server, *args, check=True):
    env = isolated_aws_env()
    env.update(server.keys.env())
    r = subprocess.run([str(CLI_BIN), "sync", *map(str, args)], env=env, capture_output=True, text=True,
                       timeout=300, stdin=subprocess.DEVNULL)
    if check and r.returncode != 0:
        raise AssertionError(f"tierckpt sync {args} -> {r.returncode}\n{r.stdout}\n{r.stderr}")
    return r


def hf_checkpoint(root, step, big=0):
    """A Hugging Face Trainer-style checkpoint-N/ directory, written under a temporary name and renamed."""
    tmp = root / f"tmp-checkpoint-{step}"
    tmp.mkdir(parents=True)
    (tmp / "trainer_state.json").write_text(json.dumps({"global_step": step}))
    (tmp / "optimizer.pt").write_bytes(os.urandom(300_000))
    (tmp / "model.safetensors").write_bytes(os.urandom(big or 1_000_000))
    tmp.rename(root / f"checkpoint-{step}")


def url(moto, bucket, prefix):
    return f"s3://{bucket}/{prefix}?endpoint={moto.endpoint}&region=us-east-1"


def test_once_pushes_checkpoint_dirs_multipart_included_and_a_fresh_instance_pulls_them(moto, bucket, tmp_path):
    local = tmp_path / "ckpt"
    hf_checkpoint(local, 100)
    hf_checkpoint(local, 200, big=40 * MiB)  # above the 16 MiB threshold: multipart
    (local / "checkpoint-200" / "model.safetensors.tierckpt-partial.9").write_bytes(b"ours, half written")
    prefix = f"job-{uuid.uuid4().hex[:8]}"
    r = run_sync(moto, "--local", local, "--remote", url(moto, bucket, prefix), "--once")
    assert "pulled 0 file(s) (0 B), pushed 6 (41.5 MiB)" in r.stdout, r.stdout
    client = moto.boto3_client()
    assert remote_files(client, bucket, prefix) == sorted(
        f"checkpoint-{s}/{n}" for s in (100, 200) for n in ("trainer_state.json", "optimizer.pt", "model.safetensors"))
    assert f"{prefix}/.tierckpt-sync/index" in list_keys(client, bucket, prefix + "/")  # the times pushed
    big = client.head_object(Bucket=bucket, Key=f"{prefix}/checkpoint-200/model.safetensors")
    assert big["ContentLength"] == 40 * MiB and big["ETag"].strip('"').endswith("-3"), big["ETag"]

    # A new instance starts empty: the start pulls everything, byte-identical.
    fresh = tmp_path / "fresh"
    r = run_sync(moto, "--local", fresh, "--remote", url(moto, bucket, prefix), "--once", "--json")
    report = json.loads(r.stdout)
    assert report["pulled"] == 6 and report["pushed"] == 0
    (local / "checkpoint-200" / "model.safetensors.tierckpt-partial.9").unlink()
    for d in (local, fresh):  # sync's own state (the journal) is per directory, never mirrored
        assert (d / ".tierckpt-sync").is_dir()
        shutil.rmtree(d / ".tierckpt-sync")
    assert_dirs_equal(local, fresh)
    # Nothing to do the second time; an empty directory deletes nothing remotely.
    r = run_sync(moto, "--local", fresh, "--remote", url(moto, bucket, prefix), "--once", "--json")
    assert json.loads(r.stdout)["unchanged"] == 6
    empty = tmp_path / "empty"
    run_sync(moto, "--local", empty, "--remote", url(moto, bucket, prefix), "--once", "--no-pull")
    assert len(remote_files(client, bucket, prefix)) == 6


def test_instance_prefixes_keep_two_instances_apart_and_the_prefix_is_slash_safe(moto, bucket, tmp_path):
    client = moto.boto3_client()
    prefix = f"multi-{uuid.uuid4().hex[:8]}"
    client.put_object(Bucket=bucket, Key=f"{prefix}/run-10/other.pt", Body=b"not mine")
    client.put_object(Bucket=bucket, Key=f"{prefix}-sibling/x.pt", Body=b"not mine either")
    for name in ("run-1", "run-2"):
        d = tmp_path / name
        d.mkdir()
        (d / "state.pt").write_bytes(name.encode() * 1000)
        run_sync(moto, "--local", d, "--remote", url(moto, bucket, prefix), "--instance-prefix", name, "--once")
    for name in ("run-1", "run-2"):
        obj = client.get_object(Bucket=bucket, Key=f"{prefix}/{name}/state.pt")["Body"].read()
        assert obj == name.encode() * 1000
        assert not (tmp_path / name / "other.pt").exists()
    # An instance pulls only its own files; the sibling prefix is never seen.
    fresh = tmp_path / "fresh"
    r = run_sync(moto, "--local", fresh, "--remote", url(moto, bucket, prefix), "--instance-prefix", "run-1",
                 "--once", "--json")
    assert json.loads(r.stdout)["pulled"] == 1
    assert sorted(str(p.relative_to(fresh)) for p in fresh.rglob("*") if p.is_file()) == [
        ".tierckpt-sync/journal-run-1", "state.pt"]


def test_a_remote_key_that_would_escape_the_directory_is_refused(moto, bucket, tmp_path):
    client = moto.boto3_client()
    prefix = f"evil-{uuid.uuid4().hex[:8]}"
    client.put_object(Bucket=bucket, Key=f"{prefix}/ok.pt", Body=b"fine")
    client.put_object(Bucket=bucket, Key=f"{prefix}/a/../../escape.pt", Body=b"no")
    r = run_sync(moto, "--local", tmp_path / "d", "--remote", url(moto, bucket, prefix), "--once", check=False)
    assert r.returncode == 1
    assert "escape.pt" in r.stderr and "path rule" in r.stderr, r.stderr
    assert (tmp_path / "d" / "ok.pt").read_bytes() == b"fine"
    assert not (tmp_path / "escape.pt").exists()


def test_filesystem_remote_and_clear_errors(tmp_path):
    local = tmp_path / "ckpt"
    hf_checkpoint(local, 5)
    env = dict(os.environ)
    r = subprocess.run([str(CLI_BIN), "sync", "--local", str(local), "--remote", str(tmp_path / "remote"), "--once"],
                       capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    # The remote's state is the index of modification times (docs/sync.md); the journal stays local.
    assert os.listdir(tmp_path / "remote" / ".tierckpt-sync") == ["index"]
    shutil.rmtree(local / ".tierckpt-sync")
    shutil.rmtree(tmp_path / "remote" / ".tierckpt-sync")
    assert_dirs_equal(local, tmp_path / "remote")
    r = subprocess.run([str(CLI_BIN), "sync", "--local", str(local), "--remote", "gs://x/y", "--once"],
                       capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL)
    assert r.returncode == 1 and "unknown scheme" in r.stderr
    r = subprocess.run([str(CLI_BIN), "sync", "--local", str(local), "--remote", str(tmp_path / "remote"), "--once",
                        "--", "true"], capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL)
    assert r.returncode == 1 and "cannot wrap a command" in r.stderr


# ---- the watching mode ---------------------------------------------------------------------------

TRAINER = r'''
import os, shutil, sys, time
root = sys.argv[1]
def checkpoint(step, size):
    tmp = os.path.join(root, f"tmp-checkpoint-{step}")
    os.makedirs(tmp)
    for name, n in (("model.safetensors", size), ("trainer_state.json", 64)):
        with open(os.path.join(tmp, name), "wb") as f:
            f.write(bytes([step % 251]) * n)
    os.rename(tmp, os.path.join(root, f"checkpoint-{step}"))
checkpoint(1, 200_000)
time.sleep(1.0)
checkpoint(2, 20 * 1024 * 1024)
time.sleep(1.0)
shutil.rmtree(os.path.join(root, "checkpoint-1"))   # save_total_limit=1
time.sleep(1.0)
sys.exit(3)
'''


def sync_popen(server, *args, endpoint=None):
    env = isolated_aws_env()
    env.update(server.keys.env())
    return subprocess.Popen([str(CLI_BIN), "sync", *map(str, args)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)


def remote_files(client, bucket, prefix):
    """The mirrored files below prefix (sync's own state, .tierckpt-sync/, left out)."""
    keys = (k[len(prefix) + 1:] for k in list_keys(client, bucket, prefix + "/"))
    return sorted(k for k in keys if not k.startswith(".tierckpt-sync/"))


def test_wrapping_a_trainer_uploads_renamed_checkpoints_once_mirrors_deletions_and_keeps_its_status(
        moto, bucket, tmp_path):
    local = tmp_path / "ckpt"
    prefix = f"wrap-{uuid.uuid4().hex[:8]}"
    script = tmp_path / "trainer.py"
    script.write_text(TRAINER)
    r = run_sync(moto, "--local", local, "--remote", url(moto, bucket, prefix), "--settle-ms", "300", "--",
                 sys.executable, script, local, check=False)
    assert r.returncode == 3, r.stderr  # the trainer's status, after the final flush
    client = moto.boto3_client()
    assert remote_files(client, bucket, prefix) == ["checkpoint-2/model.safetensors",
                                                    "checkpoint-2/trainer_state.json"], r.stderr
    body = client.get_object(Bucket=bucket, Key=f"{prefix}/checkpoint-2/model.safetensors")["Body"].read()
    assert body == bytes([2]) * (20 * 1024 * 1024)
    assert "tmp-checkpoint" not in r.stderr.replace("tmp-checkpoint-", "")  # nothing uploaded under the temp name
    assert "event=sync_deleted path=checkpoint-1/model.safetensors" in r.stderr, r.stderr


def test_sigterm_flushes_pending_uploads_and_exits_0_when_everything_is_remote(moto, bucket, tmp_path):
    local = tmp_path / "ckpt"
    local.mkdir()
    prefix = f"term-{uuid.uuid4().hex[:8]}"
    p = sync_popen(moto, "--local", local, "--remote", url(moto, bucket, prefix), "--settle-ms", "60000")
    first = p.stderr.readline()  # "sync: watching ...": the watch is in place
    assert first.startswith("sync: watching"), first
    (local / "last.pt").write_bytes(os.urandom(3 * MiB))  # settles in 60 s: only the flush uploads it
    time.sleep(0.5)
    assert "last.pt" not in remote_files(moto.boto3_client(), bucket, prefix)
    p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 0, err
    assert "flushing within 60 s" in err, err
    assert "last.pt" in remote_files(moto.boto3_client(), bucket, prefix), err


@pytest.mark.long
def test_an_s3_outage_is_retried_until_the_upload_lands(moto, bucket, tmp_path):
    from fault_proxy import Fault, FaultProxy  # noqa: PLC0415
    local = tmp_path / "ckpt"
    local.mkdir()
    prefix = f"outage-{uuid.uuid4().hex[:8]}"
    with FaultProxy(moto.endpoint) as proxy:
        proxy.add(Fault("internal", method="PUT", first=12))  # more than one upload's own retries
        remote = f"s3://{bucket}/{prefix}?endpoint={proxy.endpoint}&region=us-east-1&max_attempts=3"
        p = sync_popen(moto, "--local", local, "--remote", remote, "--settle-ms", "100")
        assert p.stderr.readline().startswith("sync: watching")
        (local / "a.pt").write_bytes(b"payload" * 1000)
        deadline = time.time() + 60
        client = moto.boto3_client()
        while "a.pt" not in remote_files(client, bucket, prefix) and time.time() < deadline:
            time.sleep(0.5)
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=60)
    assert "a.pt" in remote_files(client, bucket, prefix), err
    assert p.returncode == 0, err
    assert "event=sync_upload_failed path=a.pt attempt=1" in err, err


def test_a_restarted_sync_uploads_what_was_written_while_it_was_down(moto, bucket, tmp_path):
    local = tmp_path / "ckpt"
    local.mkdir()
    (local / "last.ckpt").write_bytes(b"1" * 4000)
    prefix = f"resume-{uuid.uuid4().hex[:8]}"
    p = sync_popen(moto, "--local", local, "--remote", url(moto, bucket, prefix), "--settle-ms", "100")
    assert p.stderr.readline().startswith("sync: watching")  # last.ckpt is up (first pass)
    p.kill()  # SIGKILL: no flush
    p.communicate(timeout=30)
    (local / "while-down.pt").write_bytes(b"d" * 5000)
    (local / "last.ckpt").write_bytes(b"2" * 4000)  # rewritten, same size: the journal tells
    os.utime(local / "last.ckpt", ns=(1_700_000_000_000_000_000, 1_700_000_000_000_000_000))
    p = sync_popen(moto, "--local", local, "--remote", url(moto, bucket, prefix), "--settle-ms", "100")
    deadline = time.time() + 30
    client = moto.boto3_client()
    while "while-down.pt" not in remote_files(client, bucket, prefix) and time.time() < deadline:
        time.sleep(0.3)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    assert remote_files(client, bucket, prefix) == ["last.ckpt", "while-down.pt"]

    assert client.get_object(Bucket=bucket, Key=f"{prefix}/last.ckpt")["Body"].read() == b"2" * 4000


def test_files_pulled_at_start_are_not_uploaded_back(moto, bucket, tmp_path):
    client = moto.boto3_client()
    prefix = f"pulled-{uuid.uuid4().hex[:8]}"
    client.put_object(Bucket=bucket, Key=f"{prefix}/checkpoint-9/model.pt", Body=b"m" * 10000)
    local = tmp_path / "ckpt"
    p = sync_popen(moto, "--local", local, "--remote", url(moto, bucket, prefix), "--settle-ms", "100")
    assert p.stderr.readline().startswith("sync: watching ")
    time.sleep(1.5)  # well past the settle time of the pulled file's rename event
    p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    assert (local / "checkpoint-9" / "model.pt").read_bytes() == b"m" * 10000
    assert "event=sync_uploaded" not in err, err


# ---- what a pull restores: modification times; what a deletion leaves: no empty directory ----------------

def test_a_pull_gives_files_and_directories_the_times_they_were_pushed_with(moto, bucket, tmp_path):
    """The HF Trainer rotates checkpoints by modification time (save_total_limit): after a pull on a new
    machine, checkpoint-N directories must keep their order."""
    local = tmp_path / "ckpt"
    hf_checkpoint(local, 2)
    hf_checkpoint(local, 1)  # written last, but the older checkpoint by its times
    t0 = 1_600_000_000_000_000_000
    times = {}
    for step, base in ((1, t0), (2, t0 + 500 * 10**9)):
        for i, name in enumerate(("model.safetensors", "optimizer.pt", "trainer_state.json")):
            f = local / f"checkpoint-{step}" / name
            times[f"checkpoint-{step}/{name}"] = base + i * 10**9 + 123
            os.utime(f, ns=(base, base + i * 10**9 + 123))
    prefix = f"mtime-{uuid.uuid4().hex[:8]}"
    run_sync(moto, "--local", local, "--remote", url(moto, bucket, prefix), "--once")

    fresh = tmp_path / "fresh"
    before = time.time_ns()
    r = run_sync(moto, "--local", fresh, "--remote", url(moto, bucket, prefix), "--once", "--json")
    assert json.loads(r.stdout)["pulled"] == 6
    for rel, ns in times.items():
        assert (fresh / rel).stat().st_mtime_ns == ns, rel
    for step in (1, 2):  # a directory: the newest of its files
        d = fresh / f"checkpoint-{step}"
        assert d.stat().st_mtime_ns == max(f.stat().st_mtime_ns for f in d.iterdir())
    by_time = sorted((p for p in fresh.iterdir() if p.name.startswith("checkpoint-")),
                     key=lambda p: p.stat().st_mtime_ns)
    assert [p.name for p in by_time] == ["checkpoint-1", "checkpoint-2"]  # what the Trainer's rotation reads

    # A remote written before times were recorded (no index) still pulls: the time of the pull.
    moto.boto3_client().delete_object(Bucket=bucket, Key=f"{prefix}/.tierckpt-sync/index")
    old = tmp_path / "old"
    r = run_sync(moto, "--local", old, "--remote", url(moto, bucket, prefix), "--once", "--json")
    assert json.loads(r.stdout)["pulled"] == 6, r.stderr
    assert (old / "checkpoint-1" / "model.safetensors").stat().st_mtime_ns >= before


def test_a_directory_remote_keeps_no_emptied_checkpoint_directory(tmp_path):
    """The trainer deletes checkpoint-1 (save_total_limit=1): the directory remote drops the directory too."""
    local = tmp_path / "ckpt"
    remote = tmp_path / "remote"
    script = tmp_path / "trainer.py"
    script.write_text(TRAINER)
    r = subprocess.run([str(CLI_BIN), "sync", "--local", str(local), "--remote", str(remote), "--settle-ms", "300",
                        "--", sys.executable, str(script), str(local)], capture_output=True, text=True,
                       timeout=300, stdin=subprocess.DEVNULL)
    assert r.returncode == 3, r.stderr
    assert "event=sync_deleted path=checkpoint-1/model.safetensors" in r.stderr, r.stderr
    assert sorted(p.name for p in remote.iterdir()) == [".tierckpt-sync", "checkpoint-2"], r.stderr
    assert sorted(p.name for p in (remote / "checkpoint-2").iterdir()) == ["model.safetensors",
                                                                         "trainer_state.json"]
    # The index holds checkpoint-2's files only, with their local times.
    lines = (remote / ".tierckpt-sync" / "index").read_text().splitlines()
    assert lines[0] == "tierckpt-sync-index 1"
    recorded = {line.split(" ", 2)[2]: int(line.split(" ", 2)[1]) for line in lines[1:]}
    assert recorded == {f"checkpoint-2/{n}": (local / "checkpoint-2" / n).stat().st_mtime_ns
                        for n in ("model.safetensors", "trainer_state.json")}
