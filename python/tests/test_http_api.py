"""The REAL amzn-sagemaker-checkpointing 1.1.3 against tierckptd's in-memory checkpoint HTTP API
(--http-listen, docs/http-api.md), unchanged.

* Its ``InMemoryCheckpointClient`` against a real agent: namespaces, shards with their Shard-Meta,
  latest, deletes, reset; a step it posted is a tierckpt step (``tierckpt ls``, ``persist``,
  ``verify``) and comes back from the durable tier once memory lost it.
* Its own integration suite (the source distribution's ``tests/local_tests``), run by pytest with
  tierckptd in place of its FastAPI stand-in on the port that suite points its client at
  (``common.MEMBRAIN_PORT``), and moto in place of AWS for its S3 tests.
"""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import textwrap
import time
import uuid
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from agent_harness import free_port
from conftest import SHM
from s3_moto import s3_server
from sagemaker_ref import REPO, ref_sdist, ref_site
from tierckpt import agent as tc_agent


@pytest.fixture
def ref_client(agents, monkeypatch):
    """An agent serving the HTTP API, and the reference's client class pointed at it."""
    site = ref_site()
    port = free_port()
    agent = agents("--memory-budget", "256MiB", "--http-listen", f"127.0.0.1:{port}")
    monkeypatch.syspath_prepend(str(site))
    from amzn_sagemaker_checkpointing.config.in_memory_client import InMemoryClientConfig
    from amzn_sagemaker_checkpointing.storage.clients.inmemory.inmemory_client import InMemoryCheckpointClient

    def make(namespace: str, rank: int, world_size: int, **kwargs):
        return InMemoryCheckpointClient(namespace, str(rank), str(world_size),
                                        config=InMemoryClientConfig(base_url=f"http://127.0.0.1:{port}"), **kwargs)

    make.agent = agent
    make.port = port
    return make


def test_the_reference_client_saves_lists_loads_and_deletes_on_tierckptd(ref_client):
    from amzn_sagemaker_checkpointing.storage.clients.inmemory.exceptions import InMemoryResourceNotFoundError

    agent = ref_client.agent
    ranks = [ref_client("refjob", r, 2, steps_retained=2) for r in range(2)]
    assert ranks[0].get_namespace_config() == {}
    assert ranks[0].get_or_create_namespace() == {"num_ranks": 3, "steps_to_retain_per_rank": 2}
    assert ranks[1].get_or_create_namespace()["num_ranks"] == 3  # exists: read, not created again
    shards = {r: os.urandom(1 << 20) + bytes([r]) for r in range(2)}
    for step in (10, 20, 30):
        for r, c in enumerate(ranks):
            c.put_checkpoint(step=step, data=shards[r] + step.to_bytes(4, "little"))
        assert step not in ranks[0].get_latest_checkpoints()  # the metadata shard is missing
        ranks[0].put_checkpoint(step=step, data=b"metadata %d" % step, metadata_index=0)
        assert ranks[0].get_latest_checkpoints()[0] == step
    assert ranks[1].get_latest_checkpoints(limit=5) == [30, 20]  # steps_retained=2
    for r, c in enumerate(ranks):
        assert c.get_checkpoint(step=30) == shards[r] + (30).to_bytes(4, "little")  # checksum checked by the client
    assert ranks[1].get_checkpoint(step=30, metadata_index=0) == b"metadata 30"
    assert ranks[0].get_checkpoint(step=10) is None

    # A step posted through HTTP is a tierckpt step: listed, persisted, verified, restored.
    steps = agent.steps("refjob")
    assert sorted(steps) == [20, 30] and steps[30]["objects"] == 3, steps
    agent.cli("persist", "refjob", 30, "--wait")
    verified = json.loads(agent.cli("--json", "verify", "refjob", 30).stdout)
    assert verified["ok"], verified
    agent.cli("rm", "refjob", 30)
    assert ranks[0].get_latest_checkpoints() == [20]
    # Memory lost it; the durable copy is read back (verified) into memory by the GET.
    assert ranks[1].get_checkpoint(step=30) == shards[1] + (30).to_bytes(4, "little")
    assert 30 in agent.steps("refjob")

    with pytest.raises(InMemoryResourceNotFoundError):
        ranks[0].delete_checkpoint(step=99)
    ranks[0].delete_checkpoint(step=20)  # drops the whole step: it could not be loaded any more
    assert 20 not in agent.steps("refjob")
    ranks[0].reset_cluster()
    assert ranks[0].get_namespace_config() == {}
    assert ranks[0].get_latest_checkpoints() == []


def test_bad_uploads_get_clear_errors_and_leave_nothing(ref_client):
    import requests

    base = f"http://127.0.0.1:{ref_client.port}"
    c = ref_client("badjob", 0, 1)
    c.get_or_create_namespace()
    r = requests.post(f"{base}/v1/cp/checkpoints/badjob/0/1", data=b"payload",
                      headers={"Shard-Meta": json.dumps({"checksum": "AAAAAAAAAAAAAAAAAAAAAA==",
                                                         "algorithm": "xxh3_128"})})
    assert r.status_code == 400 and "does not match its Shard-Meta checksum" in r.json()["detail"], r.text
    r = requests.post(f"{base}/v1/cp/checkpoints/badjob/7/1", data=b"payload")
    assert r.status_code == 400 and "num_ranks 2" in r.json()["detail"], r.text
    r = requests.post(f"{base}/v1/cp/checkpoints/nojob/0/1", data=b"payload")
    assert r.status_code == 404 and "POST /v1/cp/namespaces/nojob" in r.json()["detail"], r.text
    r = requests.post(f"{base}/v1/cp/namespaces/badjob", params={"num_ranks": 2})
    assert r.status_code == 409, r.text
    r = requests.post(f"{base}/v1/cp/namespaces/bad%2Fjob", params={"num_ranks": 2})
    assert r.status_code in (400, 404), r.text
    assert requests.get(f"{base}/health").json() == {"status": "healthy"}
    assert ref_client.agent.steps("badjob") == {}


def _write_suite_conftest(where: Path, agent_bin: str, port: int, run_dir: Path) -> None:
    """A conftest.py that makes the suite's start_membrain_server start tierckptd instead."""
    # In tests/ (no __init__.py there): pytest imports the suite as the package local_tests.
    (where / "tests" / "conftest.py").write_text(textwrap.dedent(f"""
        import os, subprocess, sys, time, urllib.request, uuid
        sys.path.insert(0, os.path.dirname(__file__))
        import local_tests.common as common

        assert common.MEMBRAIN_PORT == {port}, common.MEMBRAIN_PORT

        def start_tierckptd():
            tag = uuid.uuid4().hex[:8]
            log = open("{run_dir}/tierckptd-" + tag + ".log", "ab")
            proc = subprocess.Popen(["{agent_bin}", "--root", "{SHM}/tierckpt-refsuite-" + tag,
                                     "--socket", "{run_dir}/agent-" + tag + ".sock", "--memory-budget", "1GiB",
                                     "--http-listen", "127.0.0.1:{port}"],
                                    stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
            for _ in range(200):
                try:
                    urllib.request.urlopen("http://127.0.0.1:{port}/health", timeout=1)
                    return proc
                except OSError:
                    assert proc.poll() is None, "tierckptd exited"
                    time.sleep(0.05)
            raise RuntimeError("tierckptd did not answer on port {port}")

        common.start_membrain_server = start_tierckptd
    """))


def test_the_reference_suite_passes_against_tierckptd(tmp_path):
    """tests/local_tests of the 1.1.3 source distribution, with tierckptd for its memory service."""
    site = ref_site()
    sdist = ref_sdist()
    suite = tmp_path / "ref"
    shutil.copytree(sdist / "tests", suite / "tests")
    common = (suite / "tests" / "local_tests" / "common.py").read_text()
    port = int(common.split("MEMBRAIN_PORT = ")[1].split()[0])
    _write_suite_conftest(suite, tc_agent.find_binary("tierckptd"), port, tmp_path)
    server = s3_server.MotoServer(log_dir=tmp_path).start()
    try:
        bucket = server.create_bucket(f"refsuite-{uuid.uuid4().hex[:10]}")
        env = s3_server.isolated_aws_env()
        env.update(server.keys.env())
        env.update(AWS_ENDPOINT_URL=server.endpoint, SM_CHKPT_BUCKET=bucket,
                   PYTHONPATH=os.pathsep.join([str(suite), str(site)]))
        junit = tmp_path / "junit.xml"
        tests = ["tests/local_tests/test_distributed_checkpoint.py", "tests/local_tests/test_s3_checkpoint.py",
                 *os.environ.get("TIERCKPT_REF_SUITE_EXTRA", "").split()]
        t0 = time.time()
        r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={junit}",
                            "--rootdir", str(suite), *tests], cwd=suite, env=env, capture_output=True, text=True,
                           timeout=900, stdin=subprocess.DEVNULL)
        logs = "".join(p.read_text(errors="replace")[-3000:] for p in tmp_path.glob("tierckptd-*.log"))
        assert r.returncode == 0, f"the reference's suite failed:\n{r.stdout[-8000:]}\n{r.stderr[-3000:]}\n{logs}"
        cases = ET.parse(junit).getroot().iter("testcase")
        passed = [c.get("name") for c in cases if not list(c)]
        print(f"reference suite: {len(passed)} passed in {time.time() - t0:.0f} s: {passed}")
        assert set(passed) >= {"test_single_checkpoint", "test_multi_step_returns_latest",
                               "test_s3_fallback_after_membrain_reset", "test_s3_multi_step_load_latest_and_specific"}
        # The suite's checkpoints went through tierckptd: its shards were committed there.
        assert "http_step_committed" in logs, logs[-2000:]
    finally:
        server.stop()


def test_an_agent_killed_mid_save_keeps_committed_steps_and_shows_no_partial_one(ref_client):
    """SIGKILL of tierckptd while a step is half posted (one shard of two in, another mid-body): after
    the restart on the same root the namespace and the committed step are served, the partial step is
    gone, and the job posts the step again."""
    import requests

    agent, port = ref_client.agent, ref_client.port
    c = ref_client("killjob", 0, 1)  # num_ranks 2: rank 0 and the metadata rank
    c.get_or_create_namespace()
    c.put_checkpoint(step=1, data=b"committed" * 1000)
    c.put_checkpoint(step=1, data=b"meta 1", metadata_index=0)
    c.put_checkpoint(step=2, data=b"half" * 1000)  # the metadata shard never arrives
    body = os.urandom(8 << 20)
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(f"POST /v1/cp/checkpoints/killjob/1/3 HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n\r\n"
              .encode() + body[: 1 << 20])
    time.sleep(0.3)
    agent.kill()  # SIGKILL
    s.close()
    agent.start()
    assert c.get_namespace_config() == {"num_ranks": 2, "steps_to_retain_per_rank": 3}
    assert c.get_latest_checkpoints() == [1]
    assert c.get_checkpoint(step=1) == b"committed" * 1000
    assert c.get_checkpoint(step=2) is None
    assert sorted(agent.steps("killjob")) == [1], agent.steps("killjob")
    c.put_checkpoint(step=2, data=b"again")
    c.put_checkpoint(step=2, data=b"meta 2", metadata_index=0)
    assert c.get_latest_checkpoints() == [2, 1]
    assert c.get_checkpoint(step=2) == b"again"
    r = requests.get(f"http://127.0.0.1:{port}/v1/cp/checkpoints/killjob/1/3")
    assert r.status_code == 404, r.text


def test_the_unpatched_library_reaches_tierckptd_through_http_proxy(ref_client, tmp_path):
    """No code changed at all: the client keeps its default HyperPod URL, and HTTP_PROXY points it at
    the agent, which serves requests in the absolute form a proxy receives."""
    script = tmp_path / "job.py"
    script.write_text(textwrap.dedent("""
        import json
        from amzn_sagemaker_checkpointing.storage.clients.inmemory.inmemory_client import InMemoryCheckpointClient
        c = InMemoryCheckpointClient("pxjob", "0", "1")
        assert c.config.base_url.startswith("http://ai-toolkit-gossip-headless.aws-hyperpod"), c.config.base_url
        c.get_or_create_namespace()
        c.put_checkpoint(step=7, data=b"shard")
        c.put_checkpoint(step=7, data=b"meta", metadata_index=0)
        print(json.dumps({"latest": c.get_latest_checkpoints(), "shard": c.get_checkpoint(step=7).decode()}))
    """))
    env = {**os.environ, "PYTHONPATH": str(ref_site()), "HTTP_PROXY": f"http://127.0.0.1:{ref_client.port}",
           "http_proxy": f"http://127.0.0.1:{ref_client.port}", "NO_PROXY": "", "no_proxy": ""}
    r = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    assert json.loads(r.stdout.strip().splitlines()[-1]) == {"latest": [7], "shard": "shard"}
    assert 7 in ref_client.agent.steps("pxjob")


def test_the_references_reader_finds_no_step_without_raising_file_not_found(ref_client, tmp_path):
    """Why seed 000's Ray example cannot run unchanged on the real library, whatever serves its memory
    tier: its ``load_checkpoint`` resumes with ``except FileNotFoundError``, but on a fresh start the
    1.1.3 reader logs "No checkpoints to read metadata" and returns an empty ``Metadata``, so ``dcp.load``
    fails with DCP's ``RuntimeError: Missing key in checkpoint state_dict`` and the first run of the
    example dies before training (tierckpt's own reader raises ``FileNotFoundError``:
    test_compat_sagemaker.py)."""
    server = s3_server.MotoServer(log_dir=tmp_path).start()
    try:
        bucket = server.create_bucket(f"fresh-{uuid.uuid4().hex[:10]}")
        script = tmp_path / "fresh.py"
        script.write_text(textwrap.dedent(f"""
            import json, sys
            sys.path.insert(0, {str(Path(__file__).parent)!r})
            import torch, torch.distributed as dist, torch.distributed.checkpoint as dcp
            from sagemaker_ref_writer import _patch_reference
            _patch_reference({server.endpoint!r}, "http://127.0.0.1:{ref_client.port}")
            from amzn_sagemaker_checkpointing.config.sagemaker_checkpoint_config import SageMakerCheckpointConfig
            from amzn_sagemaker_checkpointing.checkpointing.filesystem.filesystem import SageMakerTieredStorageReader
            dist.init_process_group("gloo", init_method="file://{tmp_path / 'store'}", rank=0, world_size=1)
            cfg = SageMakerCheckpointConfig(namespace="fresh", world_size=1, s3_tier_base_path="s3://{bucket}/ckpt")
            try:
                dcp.load({{"model": {{"w": torch.zeros(4)}}, "step": 0}},
                         storage_reader=SageMakerTieredStorageReader(checkpoint_config=cfg))
                outcome = "loaded"
            except FileNotFoundError as e:
                outcome = "FileNotFoundError: " + str(e)
            except BaseException as e:
                outcome = type(e).__name__ + ": " + str(e)
            print(json.dumps({{"outcome": outcome}}))
        """))
        env = s3_server.isolated_aws_env()
        env.update(server.keys.env())
        env.update(AWS_ENDPOINT_URL=server.endpoint, PYTHONPATH=str(ref_site()))
        r = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=180,
                           stdin=subprocess.DEVNULL)
        assert r.returncode == 0, r.stderr[-4000:]
        outcome = json.loads(r.stdout.strip().splitlines()[-1])["outcome"]
        assert not outcome.startswith("FileNotFoundError"), outcome
        assert "Missing key in checkpoint state_dict" in outcome, outcome
        assert "No checkpoints to read metadata" in r.stderr + r.stdout
        assert ref_client.agent.steps("fresh") == {}  # it asked tierckptd, which had nothing
    finally:
        server.stop()


# sitecustomize for the Ray workers of test_the_references_ray_train_suite_passes_against_tierckptd (its
# docstring says why each part is there). It points the reference's client at tierckptd; has
# ray.train.report call the checkpoint_upload_fn it is given with NO_UPLOAD (the suite's own wait for
# its dcp.async_save), as Ray does for SYNC; delays each async save's thread by
# TIERCKPT_TEST_SAVE_DELAY_S, so that every run has the race the wait must cover; and, for a diagnosis,
# appends one line per wait to TIERCKPT_TEST_EVENTS and dumps a worker's stacks beside it when a wait or
# a dcp.load runs past TIERCKPT_TEST_DUMP_S. Ray and torch are patched when a worker imports them (an
# import hook), so Ray's own processes import neither.
_RAY_SITECUSTOMIZE = """
import faulthandler, importlib.abc, importlib.machinery, os, sys, time

url = os.environ.get("TIERCKPT_TEST_MEMORY_URL")
if url:
    from amzn_sagemaker_checkpointing.config import in_memory_client as m
    m.InMemoryClientConfig.base_url = url
    m.InMemoryClientConfig.__init__.__defaults__ = (url,) + m.InMemoryClientConfig.__init__.__defaults__[1:]

_saves = []  # this process's dcp.async_save futures
_events = os.environ.get("TIERCKPT_TEST_EVENTS")


def _running():
    return sum(not getattr(f, "upload_completion", f).done() for f in _saves)


class _Dump:
    # Dumps this process's stacks into the events directory if the block runs past TIERCKPT_TEST_DUMP_S.
    def __enter__(self):
        self.f = open(os.path.join(os.path.dirname(_events), f"stacks-{os.getpid()}.txt"), "a")
        faulthandler.dump_traceback_later(float(os.environ["TIERCKPT_TEST_DUMP_S"]), file=self.f)

    def __exit__(self, *exc):
        faulthandler.cancel_dump_traceback_later()
        self.f.close()


def _event(line):
    with open(_events, "a") as f:
        f.write(f"pid {os.getpid()}: {line}\\n")


def _patch_dcp(dcp):
    import torch.distributed.checkpoint._async_thread_executor as executor
    real_save, real_load, real_run = dcp.async_save, dcp.load, executor.save_wrapper

    def async_save(*args, **kwargs):
        f = real_save(*args, **kwargs)
        _saves.append(f)
        return f

    def delayed_save(*args, **kwargs):
        time.sleep(float(os.environ.get("TIERCKPT_TEST_SAVE_DELAY_S", "0")))
        return real_run(*args, **kwargs)

    def load(*args, **kwargs):
        _event(f"dcp.load with {_running()} of {len(_saves)} async save(s) of this process running")
        with _Dump():
            return real_load(*args, **kwargs)

    dcp.async_save, dcp.load, executor.save_wrapper = async_save, load, delayed_save


def _patch_train(train):
    real_report = train.report

    def report(*args, **kwargs):
        upload = kwargs.get("checkpoint_upload_fn")
        mode = getattr(kwargs.get("checkpoint_upload_mode"), "name", None)
        if upload is not None and mode == "NO_UPLOAD" and kwargs.get("checkpoint") is not None:
            running, t0 = _running(), time.monotonic()
            with _Dump():
                kwargs["checkpoint"] = upload(kwargs["checkpoint"], kwargs.get("checkpoint_dir_name") or "")
            _event(f"train.report(NO_UPLOAD) called checkpoint_upload_fn: {running} async save(s) were running, "
                   f"waited {time.monotonic() - t0:.3f} s")
        return real_report(*args, **kwargs)

    train.report = report


_PATCHES = {"torch.distributed.checkpoint": _patch_dcp, "ray.train": _patch_train}


class _Patch(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        patch = _PATCHES.get(name)
        if patch is None or not _events:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is not None and spec.loader is not None:
            run = spec.loader.exec_module

            def exec_module(module):
                run(module)
                patch(module)

            spec.loader.exec_module = exec_module
        return spec


sys.meta_path.insert(0, _Patch())
"""


RAY_SUITE_TIMEOUT_S = 420  # the suite took 115-130 s on 2 cores (the whole test 135-150 s)
RAY_DUMP_S = 120  # a worker's wait or load that takes longer dumps its stacks
RAY_SAVE_DELAY_S = 3  # each async save's thread starts this late: the wait is needed in every run


def test_the_references_ray_train_suite_passes_against_tierckptd(agents, tmp_path):
    """tests/local_tests/test_ray_train_checkpoint.py of the 1.1.3 sdist, unchanged, on a Ray head.

    Three things are set around it, nothing in it:
    * its ``ScalingConfig(num_workers=4)`` needs 4 CPUs; this machine has 2, so the Ray head is started
      with ``--num-cpus=4`` (the workers are small) and the suite's ``ray.init()`` joins it (RAY_ADDRESS);
    * the suite does not start a memory service (on HyperPod the cluster's one answers at the client's
      default URL), so a ``sitecustomize`` on the workers' path sets ``InMemoryClientConfig``'s default
      ``base_url`` to tierckptd, as the suite's other tests pass ``base_url`` to their stand-in. (An
      ``HTTP_PROXY`` cannot do it here: s3torchconnector's CRT client ignores ``NO_PROXY`` and would send
      its S3 requests to the agent too.)
    * the same ``sitecustomize`` has ``ray.train.report`` call the ``checkpoint_upload_fn`` it is given with
      ``CheckpointUploadMode.NO_UPLOAD`` before reporting, as Ray does for SYNC: the suite's own wait for
      its ``dcp.async_save`` (``future.result()``), where a user would wait. The suite is racy by itself
      (docs/frameworks.md, "The HyperPod client's Ray Train suite"): Ray 2.60 calls that function only for
      SYNC and ASYNC uploads (``TrainContext.report``, ray/train/v2/_internal/execution/context.py), so
      test_ray_train_save_and_load_with_verification's second report waits for nothing and its load can
      start while the save runs on another thread (the earlier 13-minute hang fits the two overlapping:
      both run DCP collectives on the default gloo group), and test_ray_train_cross_run_checkpoint_load's
      first run can end before its save is done. Neither the library nor tierckptd is at fault (tierckptd
      answers 404 for the step until its metadata shard commits it; the reader then falls back to S3).
      Each save's thread starts RAY_SAVE_DELAY_S late, so every run has the race: without the wait both
      saving tests fail with DCP's "Missing key in checkpoint state_dict" (checked), with it every worker
      logs that it waited and that its load found its save done, which the test asserts.
    S3 is moto, through AWS_ENDPOINT_URL, as for the suite's S3 tests. The suite runs under
    RAY_SUITE_TIMEOUT_S; a worker whose wait or load runs past RAY_DUMP_S dumps its threads' stacks, and a
    timeout fails this test with them, the suite's output and tierckptd's log."""
    pytest.importorskip("ray", reason="Ray is installed by scripts/setup.sh (requirements-dev.txt)")
    site = ref_site()
    sdist = ref_sdist()
    suite = tmp_path / "ref"
    shutil.copytree(sdist / "tests", suite / "tests")
    port = free_port()
    agent = agents("--memory-budget", "512MiB", "--http-listen", f"127.0.0.1:{port}")
    custom = tmp_path / "sitecustomize"
    custom.mkdir()
    (custom / "sitecustomize.py").write_text(_RAY_SITECUSTOMIZE)
    events = tmp_path / "events"
    events.mkdir()

    def diagnosis() -> str:
        return "".join(f"--- {p.name}:\n{p.read_text(errors='replace')[-6000:]}\n" for p in sorted(events.iterdir()))

    server = s3_server.MotoServer(log_dir=tmp_path).start()
    ray_bin = str(Path(sys.executable).with_name("ray"))
    env = s3_server.isolated_aws_env()
    env.update(server.keys.env())
    env.update(AWS_ENDPOINT_URL=server.endpoint, TIERCKPT_TEST_MEMORY_URL=f"http://127.0.0.1:{port}",
               PYTHONPATH=os.pathsep.join([str(custom), str(suite), str(site)]), RAY_DEDUP_LOGS="0",
               TIERCKPT_TEST_EVENTS=str(events / "events.log"), TIERCKPT_TEST_DUMP_S=str(RAY_DUMP_S),
               TIERCKPT_TEST_SAVE_DELAY_S=str(RAY_SAVE_DELAY_S))
    try:
        env["SM_CHKPT_BUCKET"] = server.create_bucket(f"rayref-{uuid.uuid4().hex[:10]}")
        r = subprocess.run([ray_bin, "start", "--head", "--num-cpus=4", "--disable-usage-stats",
                            "--include-dashboard=false"], env=env, capture_output=True, text=True, timeout=180,
                           stdin=subprocess.DEVNULL)
        assert r.returncode == 0, f"ray start failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
        env["RAY_ADDRESS"] = "auto"
        junit = tmp_path / "junit.xml"
        t0 = time.time()
        try:
            r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                                f"--junitxml={junit}", "--rootdir", str(suite),
                                "tests/local_tests/test_ray_train_checkpoint.py"], cwd=suite, env=env,
                               capture_output=True, text=True, timeout=RAY_SUITE_TIMEOUT_S, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired as e:
            said = "".join(x.decode(errors="replace") if isinstance(x, bytes) else (x or "")
                           for x in (e.stdout, e.stderr))
            pytest.fail(f"the reference's Ray suite did not finish within {RAY_SUITE_TIMEOUT_S} s and was killed:\n"
                        f"{said[-8000:]}\nthe workers' waits, loads and stacks (dumped by a wait or load that ran "
                        f"past {RAY_DUMP_S} s):\n{diagnosis()}\ntierckptd:\n{agent.log_text()[-3000:]}")
        assert r.returncode == 0, (f"the reference's Ray suite failed:\n{r.stdout[-8000:]}\n{r.stderr[-3000:]}\n"
                                   f"{diagnosis()}\n{agent.log_text()[-3000:]}")
        lines = (events / "events.log").read_text().splitlines()
        print("reference Ray suite, the workers' waits and loads:\n" + "\n".join(lines))
        # Each of the 4 workers of both saving runs waited for its save, which the delay kept running;
        # every load found its process's save done.
        waits = [x for x in lines if "train.report(NO_UPLOAD) called checkpoint_upload_fn: 1 async save(s)" in x]
        loads = [x for x in lines if "dcp.load" in x]
        assert len(waits) == 8 and len(loads) == 8, lines
        assert all("dcp.load with 0 of" in x for x in loads), loads
        passed = [c.get("name") for c in ET.parse(junit).getroot().iter("testcase") if not list(c)]
        print(f"reference Ray suite: {len(passed)} passed in {time.time() - t0:.0f} s: {passed}")
        assert set(passed) == {"test_ray_auto_detect_strategy", "test_ray_train_save_and_load_with_verification",
                               "test_ray_train_cross_run_checkpoint_load"}, passed
        # Both jobs' checkpoints went through tierckptd: each of their steps was committed there.
        assert agent.log_text().count("event=http_step_committed") >= 2, agent.log_text()[-3000:]
    finally:
        subprocess.run([ray_bin, "stop", "--force"], env=env, capture_output=True, timeout=120,
                       stdin=subprocess.DEVNULL)
        server.stop()
