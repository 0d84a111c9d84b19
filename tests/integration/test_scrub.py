"""The scrub (tierckptd --scrub-interval): a byte flipped in a committed step's tmpfs file is
found by the agent on its own, without any read, and the copy is replaced from the durable tier;
the step then loads byte-identical. Without another copy the finding is reported and the copy kept."""
import json
import time

from conftest import assert_dirs_equal


def flip_byte(path, offset=4321):
    with open(path, "r+b") as f:
        f.seek(offset)
        b = f.read(1)
        f.seek(offset)
        f.write(bytes([b[0] ^ 0x01]))


def wait_for_scrub_error(agent, timeout=30):
    deadline = time.time() + timeout
    while time.time() < deadline:
        status = agent.cli_json("agent", "status")
        found = [e for e in status.get("last_errors", []) if " scrub: " in e]
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError(f"the scrub reported nothing within {timeout} s:\n{agent.log_text()[-4000:]}")


def test_scrub_finds_a_flipped_byte_and_repairs_it_from_the_durable_tier(agents, tmp_path):
    agent = agents("--memory-budget", "256MiB", "--scrub-interval", "300ms")
    ref = tmp_path / "ref"
    agent.writer("--ns", "s", "--step", 1, "--objects", 3, "--size", 1 << 20, "--ref-dir", ref,
                 "--persist", "--wait-durable")
    victim = next(agent.root.rglob("s/step_0000000001/obj_1.bin"))
    flip_byte(victim)

    errors = wait_for_scrub_error(agent)
    assert any("obj_1.bin" in e and "corrupt" in e and "durable tier" in e for e in errors), errors
    assert "scrub_corrupt" in agent.log_text()
    # No read happened: the scrub replaced the copy; it loads (and verifies) byte-identical.
    assert agent.cli("verify", "s", 1).returncode == 0
    out = tmp_path / "out"
    agent.cli("restore", "s", 1, "--to", out)
    assert_dirs_equal(ref, out)


def test_scrub_reports_a_flip_no_other_tier_can_replace_and_keeps_the_copy(agents, tmp_path):
    agent = agents("--memory-budget", "256MiB", "--scrub-interval", "300ms")
    agent.writer("--ns", "s", "--step", 2, "--objects", 2, "--size", 1 << 20)  # memory only
    flip_byte(next(agent.root.rglob("s/step_0000000002/obj_0.bin")))
    errors = wait_for_scrub_error(agent)
    assert any("obj_0.bin" in e and "no other tier holds s/2" in e for e in errors), errors
    assert agent.steps("s")[2]["memory"] == "committed"  # kept: `tierckpt rm` is the operator's call
    r = agent.cli("verify", "s", 2, check=False)
    assert r.returncode == 1 and "obj_0.bin" in r.stdout + r.stderr


def test_scrub_interval_zero_turns_it_off(agents):
    agent = agents("--memory-budget", "256MiB", "--scrub-interval", "0")
    assert "scrub_interval_ms=0" in agent.log_text()
    agent.writer("--ns", "s", "--step", 3, "--objects", 1, "--size", 1 << 20)
    flip_byte(next(agent.root.rglob("s/step_0000000003/obj_0.bin")))
    time.sleep(1.0)
    status = agent.cli_json("agent", "status")
    assert not [e for e in status.get("last_errors", []) if " scrub: " in e]
    r = agent.cli("agent", "status", "--json")
    assert json.loads(r.stdout)["pid"] > 0
