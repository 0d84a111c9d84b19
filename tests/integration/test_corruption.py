"""Corrupt copies are detected by checksum, by verify and on read."""
import signal


def corrupt_byte(path, offset=12345):
    with open(path, "r+b") as f:
        f.seek(offset)
        b = f.read(1)
        f.seek(offset)
        f.write(bytes([b[0] ^ 0xFF]))


def test_verify_detects_memory_corruption_and_names_the_object(agent):
    agent.writer("--ns", "c", "--step", 1, "--objects", 3, "--size", 1 << 20)
    assert agent.cli("verify", "c", 1).returncode == 0
    corrupt_byte(next(agent.root.rglob("step_0000000001/obj_2.bin")))
    r = agent.cli("verify", "c", 1, check=False)
    assert r.returncode == 1
    assert "obj_2.bin" in r.stdout + r.stderr


def test_restore_refuses_corrupt_memory_copy(agent, tmp_path):
    agent.writer("--ns", "c", "--step", 1, "--objects", 2, "--size", 1 << 20)
    corrupt_byte(next(agent.root.rglob("step_0000000001/obj_0.bin")))
    r = agent.cli("restore", "c", 1, "--to", tmp_path / "out", check=False)
    assert r.returncode != 0
    assert "obj_0.bin" in r.stderr and "corrupt" in r.stderr.lower()


def test_verify_checks_durable_copy_too(agent):
    agent.writer("--ns", "c", "--step", 2, "--objects", 2, "--size", 1 << 20, "--persist",
                 "--wait-durable")
    corrupt_byte(agent.durable / "c" / "step_0000000002" / "obj_1.bin")
    r = agent.cli("verify", "c", 2, "--json", check=False)
    assert r.returncode == 1
    assert "obj_1.bin" in r.stdout


def _restore_past_damage(agent, tmp_path, damage):
    """A damaged memory copy of a persisted step: restore reads the step from the durable tier
    instead (the agent's repair path), byte-identical, and says so."""
    agent.writer("--ns", "c", "--step", 3, "--objects", 2, "--size", 1 << 20, "--persist", "--wait-durable")
    damage(next(agent.root.rglob("step_0000000003/obj_0.bin")))
    r = agent.cli("restore", "c", 3, "--to", tmp_path / "out", check=False)
    assert r.returncode == 0, r.stderr
    assert "obj_0.bin" in r.stderr and "damaged" in r.stderr
    for name in ("obj_0.bin", "obj_1.bin"):
        assert (tmp_path / "out" / name).read_bytes() == (agent.durable / "c" / "step_0000000003" / name).read_bytes()
    # The memory copy was replaced, not only bypassed.
    assert agent.cli("verify", "c", 3).returncode == 0


def test_restore_reads_past_a_corrupt_memory_copy(agent, tmp_path):
    _restore_past_damage(agent, tmp_path, corrupt_byte)


def test_restore_reads_past_a_truncated_memory_copy(agent, tmp_path):
    def truncate(path):
        with open(path, "r+b") as f:
            f.truncate(264)

    _restore_past_damage(agent, tmp_path, truncate)
