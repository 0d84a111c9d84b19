"""Save through the client, inspect with the CLI, restore byte-identical."""
import json

from conftest import assert_dirs_equal


def test_save_ls_show_verify_restore(agent, tmp_path):
    ref = tmp_path / "ref"
    agent.writer("--ns", "job1", "--step", 7, "--objects", 5, "--size", 3 << 20, "--ref-dir", ref)
    steps = agent.steps("job1")
    assert steps[7]["memory"] == "committed"
    assert steps[7]["bytes"] == 5 * (3 << 20)
    assert steps[7]["objects"] == 5

    show = agent.cli_json("show", "job1", 7)
    names = sorted(o["name"] for o in show["objects"]) if "objects" in show else \
        sorted(o["name"] for o in show["manifest"]["objects"])
    assert names == [f"obj_{i}.bin" for i in range(5)]

    v = agent.cli("verify", "job1", 7)
    assert v.returncode == 0

    out = tmp_path / "restored"
    agent.cli("restore", "job1", 7, "--to", out)
    assert_dirs_equal(ref, out)
    manifest = json.loads((out / "_tierckpt_manifest.json").read_text())
    assert manifest["step"] == 7 and manifest["namespace"] == "job1"


def test_cli_save_from_directory_with_subdirs(agent, tmp_path):
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / ".metadata").write_bytes(b"meta" * 100)
    (src / "__0_0.distcp").write_bytes(bytes(range(256)) * 4096)
    (src / "sub" / "empty.bin").write_bytes(b"")
    agent.cli("save", "dirjob", 3, "--from", src)
    out = tmp_path / "out"
    agent.cli("restore", "dirjob", 3, "--to", out)
    assert_dirs_equal(src, out)


def test_restore_refuses_nonempty_dir_without_force(agent, tmp_path):
    agent.writer("--ns", "j", "--step", 1, "--objects", 1, "--size", 1000)
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    r = agent.cli("restore", "j", 1, "--to", out, check=False)
    assert r.returncode != 0
    assert (out / "keep.txt").read_text() == "mine"
    agent.cli("restore", "j", 1, "--to", out, "--force")
    assert (out / "obj_0.bin").stat().st_size == 1000


def test_direct_fill_with_agent_computed_checksums(agent, tmp_path):
    ref = tmp_path / "ref"
    agent.writer("--ns", "direct", "--step", 2, "--objects", 3, "--size", (1 << 20) + 3,
                 "--ref-dir", ref, "--direct")
    assert agent.cli("verify", "direct", 2).returncode == 0
    out = tmp_path / "out"
    agent.cli("restore", "direct", 2, "--to", out)
    assert_dirs_equal(ref, out)


def test_many_small_objects(agent, tmp_path):
    ref = tmp_path / "ref"
    agent.writer("--ns", "small", "--step", 1, "--objects", 2000, "--size", 512, "--ref-dir", ref)
    out = tmp_path / "out"
    agent.cli("restore", "small", 1, "--to", out)
    assert_dirs_equal(ref, out)


def test_unknown_step_is_a_clear_error(agent):
    r = agent.cli("show", "nojob", 5, check=False)
    assert r.returncode == 1
    assert "nojob" in r.stderr
