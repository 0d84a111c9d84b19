"""boto3 as an independent second client of the S3 durable tier.

- A DCP step saved through the Python front (TieredWriter) and persisted to
  S3, downloaded with boto3, loads with stock torch FileSystemReader.
- A step directory uploaded with boto3 (objects, then the manifest) is listed,
  verified and restored by our CLI.
- A step uploaded with boto3 WITHOUT its manifest is invisible; the agent's
  first persist of a newer step sweeps it (garbage collection), and a step left
  half-written again is cleared when the agent persists that step itself.
- CheckpointConfig(durable="s3://...") is accepted by the Python front.
"""
import uuid
import warnings

from conftest import assert_dirs_equal
from conftest_s3 import (MANIFEST, MiB, assert_s3_step_equals, bucket, download_prefix, moto,  # noqa: F401
                         list_keys, s3_agent, step_prefix, upload_dir, wipe_tmpfs_and_restart, write_tree)


def new_prefix() -> str:
    return f"interop/{uuid.uuid4().hex[:10]}"


def dcp_state(seed: int):
    import torch  # noqa: PLC0415  (only this module's DCP tests need torch)

    g = torch.Generator().manual_seed(seed)
    return {
        "model": {"w": torch.randn(256, 384, generator=g), "b": torch.randn(384, generator=g),
                  "h": torch.randn(33, 7, generator=g).to(torch.bfloat16),
                  "ids": torch.randint(-(2**40), 2**40, (1000,), generator=g, dtype=torch.int64)},
        "extra": {"step": 1000 + seed, "name": f"run-{seed}"},
    }


def dcp_zeros_like(state):
    import torch  # noqa: PLC0415

    return {"model": {k: torch.zeros_like(v) for k, v in state["model"].items()},
            "extra": {"step": 0, "name": ""}}


def assert_same_state(expected, got):
    import torch  # noqa: PLC0415

    for k, v in expected["model"].items():
        assert got["model"][k].dtype == v.dtype and torch.equal(got["model"][k], v), k
    assert got["extra"] == expected["extra"]


def test_dcp_step_on_s3_loads_with_stock_filesystem_reader(moto, bucket, agents, tmp_path):
    warnings.filterwarnings("ignore", message="torch.distributed is disabled")
    import torch.distributed.checkpoint as dcp  # noqa: PLC0415
    from torch.distributed.checkpoint import FileSystemReader  # noqa: PLC0415

    from tierckpt.torch import CheckpointConfig, TieredWriter, wait_durable  # noqa: PLC0415

    prefix = new_prefix()
    a = s3_agent(agents, moto.s3_url(bucket, prefix), moto.keys)
    cfg = CheckpointConfig("dcp-s3", socket=str(a.socket), auto_start=False)
    state = dcp_state(7)
    dcp.save(state, storage_writer=TieredWriter(cfg, 4, persist=True), no_dist=True)
    wait_durable(cfg, 4, timeout_s=120)

    step_dir = tmp_path / "step_0000000004"
    names = download_prefix(moto.boto3_client(), bucket, step_prefix(prefix, "dcp-s3", 4), step_dir)
    assert {".metadata", "__0_0.distcp", MANIFEST} <= set(names), names
    target = dcp_zeros_like(state)
    dcp.load(target, storage_reader=FileSystemReader(str(step_dir)), no_dist=True)
    assert_same_state(state, target)


def test_python_config_accepts_s3_durable_base(moto, bucket, agents):
    """The same s3:// URL in CheckpointConfig.durable and the agent's --durable."""
    warnings.filterwarnings("ignore", message="torch.distributed is disabled")
    import torch.distributed.checkpoint as dcp  # noqa: PLC0415

    from tierckpt.torch import CheckpointConfig, TieredReader, TieredWriter, list_steps, wait_durable  # noqa: PLC0415

    url = moto.s3_url(bucket, new_prefix())
    a = s3_agent(agents, url, moto.keys)
    cfg = CheckpointConfig("cfg-s3", socket=str(a.socket), durable=url, auto_start=False)
    state = dcp_state(8)
    dcp.save(state, storage_writer=TieredWriter(cfg, 1, persist=True), no_dist=True)
    wait_durable(cfg, 1, timeout_s=120)
    summaries = {s.step: s for s in list_steps(cfg)}
    assert summaries[1].durable == "committed"
    target = dcp_zeros_like(state)
    dcp.load(target, storage_reader=TieredReader(cfg), no_dist=True)
    assert_same_state(state, target)


def test_boto3_uploaded_step_is_listed_verified_and_restored(moto, bucket, agents, tmp_path):
    prefix = new_prefix()
    a = s3_agent(agents, moto.s3_url(bucket, prefix), moto.keys)
    # A step directory with a valid manifest: save to memory only, restore it
    # as files (objects + _tierckpt_manifest.json), then drop it from memory.
    src = write_tree(tmp_path / "src", {"__0_0.distcp": 3 * MiB + 5, ".metadata": 777, "opt/shard_1.bin": 4096})
    a.cli("save", "up", 5, "--from", src)
    stepdir = tmp_path / "stepdir"
    a.cli("restore", "up", 5, "--to", stepdir)
    assert (stepdir / MANIFEST).is_file()
    a.cli("rm", "up", 5)
    assert 5 not in a.steps("up")

    s3 = moto.boto3_client()
    upload_dir(s3, bucket, step_prefix(prefix, "up", 5), stepdir)  # objects first, manifest last
    st = a.steps("up")[5]
    assert st["durable"] == "committed" and st["memory"] != "committed", st
    assert a.cli("verify", "up", 5).returncode == 0
    out = tmp_path / "out"
    a.cli("restore", "up", 5, "--to", out)
    assert_dirs_equal(src, out)


def test_boto3_step_without_manifest_is_invisible_and_swept(moto, bucket, agents, tmp_path):
    prefix = new_prefix()
    a = s3_agent(agents, moto.s3_url(bucket, prefix), moto.keys)
    s3 = moto.boto3_client()
    # Step 6: objects only, as if the uploader died before the manifest.
    stray = write_tree(tmp_path / "stray", {"__0_0.distcp": MiB, ".metadata": 100})
    upload_dir(s3, bucket, step_prefix(prefix, "up", 6), stray, manifest=False)
    # Step 7: committed through the agent.
    ref7 = tmp_path / "ref7"
    a.writer("--ns", "up", "--step", 7, "--objects", 2, "--size", 4096, "--ref-dir", ref7, "--persist",
             "--wait-durable")
    # The first durable step of the namespace swept the older uncommitted one.
    assert list_keys(s3, bucket, step_prefix(prefix, "up", 6)) == []
    # A half-written step 6 again (after the sweep): invisible, and cleared by
    # the agent's own persist of step 6 below.
    upload_dir(s3, bucket, step_prefix(prefix, "up", 6), stray, manifest=False)
    wipe_tmpfs_and_restart(a)

    steps = a.steps("up")
    assert 6 not in steps and steps[7]["durable"] == "committed", steps
    assert a.cli("show", "up", 6, check=False).returncode == 1
    out6 = tmp_path / "out6"
    assert a.cli("restore", "up", 6, "--to", out6, check=False).returncode == 1
    assert not (out6 / MANIFEST).exists()

    # Persisting step 6 for real clears what the dead uploader left there.
    ref6 = tmp_path / "ref6"
    a.writer("--ns", "up", "--step", 6, "--objects", 1, "--size", 2048, "--ref-dir", ref6, "--persist",
             "--wait-durable")
    assert_s3_step_equals(s3, bucket, step_prefix(prefix, "up", 6), ref6)
    assert_s3_step_equals(s3, bucket, step_prefix(prefix, "up", 7), ref7)
