"""Regressions from issue 42 item 6 (bad inputs found by an attack), with the
real agent and the real CLI: a regular file given as the socket path, and a
cluster secret file other users can read. (The third, a bad
TIERCKPT_MEMORY_BUDGET for the embedded agent, is in
python/tests/test_embedded.py.)
"""
import subprocess

import pytest

from agent_harness import write_hostfile
from conftest import CLI_BIN


def cli(socket, *args):
    return subprocess.run([str(CLI_BIN), "--socket", str(socket), *map(str, args)], capture_output=True,
                          text=True, timeout=60, stdin=subprocess.DEVNULL)


# ---- a regular file at the socket path --------------------------------------------------------

@pytest.mark.parametrize("command", [["agent", "status"], ["ls"], ["agent", "start"], ["agent", "stop"]])
def test_a_regular_file_as_the_socket_path_is_named_not_taken_for_a_missing_agent(tmp_path, command):
    sock = tmp_path / "run" / "agent.sock"
    sock.parent.mkdir(mode=0o700)
    sock.write_text("precious")
    r = cli(sock, *command)
    # Before: exit 3, "no tierckptd answers on ...: start one" (status, ls), or "no agent running
    # (nothing to stop)" with exit 0 (stop), or a start that fails in the agent (start).
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    assert f"cannot connect to tierckptd at {sock}: it is a regular file, not a socket" in r.stderr, r.stderr
    assert "TIERCKPT_SOCKET" in r.stderr
    assert "no tierckptd answers" not in r.stderr and "nothing to stop" not in r.stdout
    assert r.stderr.count(str(sock)) == 1, r.stderr  # said once, not repeated by the context
    assert sock.read_text() == "precious"


def test_a_directory_as_the_socket_path_is_named_too(tmp_path):
    sock = tmp_path / "run" / "agent.sock"
    sock.mkdir(parents=True, mode=0o700)
    r = cli(sock, "agent", "status")
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert f"cannot connect to tierckptd at {sock}: it is a directory, not a socket" in r.stderr, r.stderr


# ---- a cluster secret file others can read (decision 83) --------------------------------------

def _peer_agent(agents, tmp_path, secret):
    hosts = tmp_path / "hosts"
    write_hostfile(hosts, 2)  # n2 need not run for n1 to start
    return agents("--memory-budget", "64MiB", "--node-id", "n1", "--peers", hosts, "--peer-secret-file", secret,
                  start=False)


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o660], ids=lambda m: f"{m:04o}")
def test_a_peer_secret_file_others_can_read_is_refused_at_start(agents, tmp_path, mode):
    secret = tmp_path / "secret"
    secret.write_bytes(b"0123456789abcdef-cluster-secret\n")
    secret.chmod(mode)
    a = _peer_agent(agents, tmp_path, secret)
    a.start(wait=False)
    assert a.proc.wait(timeout=30) == 2  # a configuration error (before: it started, silently)
    log = a.log_text()
    assert f"the cluster secret file {secret} (--peer-secret-file) has mode {mode:04o}" in log, log
    assert f"chmod 600 {secret}" in log, log


def test_a_private_peer_secret_file_is_accepted_also_through_a_link(agents, tmp_path):
    real = tmp_path / "..data" / "secret"  # how a Kubernetes Secret volume lays it out
    real.parent.mkdir()
    real.write_bytes(b"0123456789abcdef-cluster-secret\n")
    real.chmod(0o400)
    link = tmp_path / "secret"
    link.symlink_to(real)
    a = _peer_agent(agents, tmp_path, link)
    a.start()
    assert a.cli("agent", "status").returncode == 0
