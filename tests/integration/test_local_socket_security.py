"""The local Unix-socket boundary (issue 16, items 9, 11, 12): whom a client
trusts, what idle, slow and oversized same-uid connections can hold in the
agent, and what the CLI says when the agent refuses. Real agents, the real
CLI, and real second users (created here; root only) via setpriv."""
import os
import pwd
import re
import resource
import shutil
import socket
import struct
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import pytest

from conftest import AGENT_BIN, CLI_BIN, SHM

MAGIC = 0x504B4354
# kProtocolVersion, read from src/wire/protocol.h so a version bump needs no edit here.
VERSION = int(re.search(r"kProtocolVersion = (\d+);",
                        (Path(__file__).resolve().parents[2] / "src/wire/protocol.h").read_text()).group(1))
COMMIT = 5


def header(msg_type, length, request_id=1):
    return struct.pack("<IHHII", MAGIC, VERSION, msg_type, request_id, length)


def recv_frame(s):
    data = b""
    while len(data) < 16:
        chunk = s.recv(16 - len(data))
        if not chunk:
            return None
        data += chunk
    n = struct.unpack("<IHHII", data)[4]
    body = b""
    while len(body) < n:
        chunk = s.recv(n - len(body))
        if not chunk:
            break
        body += chunk
    return data + body


def idle_connection(path):
    """A connection that never sends anything (blocking connect: it waits for
    room in the accept queue, as a flood of them would)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(str(path))
    return s


def user(name):
    """A local user for the tests, created if missing (root only)."""
    if os.getuid() != 0:
        pytest.skip("needs root: creates users and runs processes as them with setpriv")
    if shutil.which("setpriv") is None or shutil.which("useradd") is None:
        pytest.skip("needs setpriv and useradd (util-linux, passwd) to act as another user")
    try:
        return pwd.getpwnam(name)
    except KeyError:
        subprocess.run(["useradd", "-M", "-s", "/usr/sbin/nologin", name], check=True, capture_output=True)
        return pwd.getpwnam(name)


def as_user(pw):
    return ["setpriv", f"--reuid={pw.pw_uid}", f"--regid={pw.pw_gid}", "--clear-groups", "--"]


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if k not in ("TIERCKPT_SOCKET", "XDG_RUNTIME_DIR")}
    env.update(extra)
    return env


def rss_bytes(pid):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


@pytest.fixture
def foe_agent(tmp_path):
    """Starts tierckptd as user `pw` on `socket`; kills it and removes its files at the end."""
    started = []

    def start(pw, sock: Path):
        root = SHM / f"tierckpt-test-foe-{uuid.uuid4().hex[:12]}"
        log = open(tmp_path / f"foe{len(started)}.log", "wb")
        proc = subprocess.Popen(
            [*as_user(pw), str(AGENT_BIN), "--socket", str(sock), "--root", str(root), "--memory-budget", "64MiB",
             "--log-level", "debug"], stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=clean_env())
        log.close()
        started.append((proc, root))
        deadline = time.time() + 15
        while not sock.exists():
            assert proc.poll() is None, (tmp_path / f"foe{len(started) - 1}.log").read_text()
            assert time.time() < deadline, "the other user's agent did not start"
            time.sleep(0.05)
        return proc

    yield start
    for proc, root in started:
        proc.kill()
        proc.wait(timeout=30)
        shutil.rmtree(root, ignore_errors=True)


def test_client_refuses_an_impostor_agent_in_the_default_tmp_directory(foe_agent):
    """Another user pre-creates the victim's default socket directory
    (/tmp/tierckpt-<uid>, used when XDG_RUNTIME_DIR is unset) and runs its own
    agent there: the victim's CLI must refuse it, naming both uids."""
    foe, victim = user("tcfoe"), user("tcvictim")
    victim_dir = Path(f"/tmp/tierckpt-{victim.pw_uid}")
    shutil.rmtree(victim_dir, ignore_errors=True)
    victim_dir.mkdir(mode=0o700)
    os.chown(victim_dir, foe.pw_uid, foe.pw_gid)
    try:
        foe_agent(foe, victim_dir / "agent.sock")
        os.chmod(victim_dir / "agent.sock", 0o666)  # an impostor lets the victim in
        r = subprocess.run([*as_user(victim), str(CLI_BIN), "ls"], env=clean_env(), capture_output=True, text=True,
                           timeout=30, stdin=subprocess.DEVNULL)
        assert r.returncode != 0, r.stdout
        assert f"uid {foe.pw_uid}" in r.stderr and f"uid {victim.pw_uid}" in r.stderr, r.stderr
        assert str(victim_dir) in r.stderr, r.stderr
    finally:
        shutil.rmtree(victim_dir, ignore_errors=True)


def test_root_client_refuses_an_agent_of_another_user(foe_agent):
    """`sudo tierckpt ...` pointed at another user's agent sends nothing to it
    unless that uid is expected: root's checkpoints do not go to a user."""
    foe = user("tcfoe")
    d = Path(tempfile.mkdtemp(prefix="tc-foe-"))
    os.chown(d, foe.pw_uid, foe.pw_gid)
    try:
        proc = foe_agent(foe, d / "agent.sock")
        r = subprocess.run([str(CLI_BIN), "--socket", str(d / "agent.sock"), "ls"], env=clean_env(),
                           capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
        assert r.returncode != 0, r.stdout
        assert f"uid {foe.pw_uid}" in r.stderr and "uid 0" in r.stderr, r.stderr
        assert proc.poll() is None
    finally:
        shutil.rmtree(d, ignore_errors=True)


@pytest.mark.parametrize("case", ["other_owner", "world_writable"])
def test_agent_refuses_a_socket_directory_it_does_not_own(agents, case):
    d = Path(tempfile.mkdtemp(prefix="tc-sockdir-"))
    try:
        if case == "other_owner":
            foe = user("tcfoe")
            os.chown(d, foe.pw_uid, foe.pw_gid)
        else:
            os.chmod(d, 0o777)
        a = agents("--memory-budget", "64MiB", socket_path=d / "agent.sock", start=False)
        a.start(wait=False)
        assert a.proc.wait(timeout=30) != 0
        log = a.log_text()
        assert str(d) in log, log
        if case == "other_owner":
            assert f"uid {foe.pw_uid}" in log, log
        else:
            assert "chmod go-w" in log, log
        assert not (d / "agent.sock").exists()
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_idle_connections_without_hello_do_not_lock_out_clients(agent):
    """1,100 same-uid connections that never send Hello: `tierckpt ls` still
    works at once (it used to fail with "response ... id 0; expected id 1")."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 1300:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
    idle = []
    try:
        idle = [idle_connection(agent.socket) for _ in range(1100)]
        start = time.time()
        r = agent.cli("ls", timeout=30)
        assert time.time() - start < 10, "ls took too long"
        assert "expected id" not in r.stderr
    finally:
        for s in idle:
            s.close()


def test_ls_answers_with_a_low_fd_limit_and_idle_connections(agents):
    """An agent under `ulimit -n 64` with 80 idle connections: ls answers in
    seconds (it used to hang for more than 20 s)."""
    def low_fd_limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))

    a = agents("--memory-budget", "64MiB", start=False)
    logf = open(a.log, "ab")
    a.proc = subprocess.Popen(a.args(), stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT, env=a.env,
                              preexec_fn=low_fd_limit)
    logf.close()
    a.wait_ready()
    idle = []
    try:
        idle = [idle_connection(a.socket) for _ in range(80)]
        start = time.time()
        r = a.cli("ls", check=False, timeout=20)
        assert time.time() - start < 10
        assert r.returncode == 0, r.stderr + a.log_text()[-3000:]
    finally:
        for s in idle:
            s.close()


def send_partial(sock_path, announced, sent):
    """A CommitStep header announcing `announced` bytes, and `sent` of them.
    (No Hello: the limits are checked from the header, before the request is
    looked at, so the frame costs the agent the same without one.)"""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(20)
    s.connect(sock_path)
    try:
        s.sendall(header(COMMIT, announced, request_id=2) + b"\0" * sent)
    except (BrokenPipeError, ConnectionResetError):
        pass  # refused from the header
    return s


def test_partial_large_requests_do_not_grow_the_agent(agent):
    """Eight connections each sending 79 MiB of an announced 80 MiB request
    grew the agent by ~650 MB, and it kept ~590 MB after they closed. Over
    the CommitStep limit they are refused from the header; within it, what
    all connections may hold is bounded, and freed when they go."""
    pid = agent.proc.pid
    base = rss_bytes(pid)
    conns = [send_partial(str(agent.socket), 80 << 20, 79 << 20) for _ in range(8)]
    answer = recv_frame(conns[0])
    assert answer is not None and struct.unpack("<I", answer[16:20])[0] != 0
    assert b"limit" in answer, answer[:300]
    assert rss_bytes(pid) - base < 64 << 20, f"grew by {(rss_bytes(pid) - base) >> 20} MiB"
    for s in conns:
        s.close()

    conns = [send_partial(str(agent.socket), 60 << 20, 59 << 20) for _ in range(8)]
    held = rss_bytes(pid) - base
    assert held < 330 << 20, f"8 x 59 MiB in flight grew the agent by {held >> 20} MiB"
    for s in conns:
        s.close()
    deadline = time.time() + 10
    while rss_bytes(pid) - base > 64 << 20 and time.time() < deadline:
        time.sleep(0.1)
    assert rss_bytes(pid) - base < 64 << 20, f"kept {(rss_bytes(pid) - base) >> 20} MiB after the clients left"
    agent.cli("ls")


def test_agent_start_does_not_log_into_another_users_tmp_directory():
    """`tierckpt agent start` logs by default to /tmp/tierckpt-<uid>/agent.log:
    in a directory another user created first, with agent.log a link to one of
    the victim's files, it must refuse instead of appending to that file."""
    foe, victim = user("tcfoe"), user("tcvictim")
    victim_dir = Path(f"/tmp/tierckpt-{victim.pw_uid}")
    target = Path(tempfile.mkdtemp(prefix="tc-victim-")) / "precious"
    shutil.rmtree(victim_dir, ignore_errors=True)
    try:
        os.chown(target.parent, victim.pw_uid, victim.pw_gid)
        target.write_text("keep me\n")
        os.chown(target, victim.pw_uid, victim.pw_gid)
        victim_dir.mkdir(mode=0o777)
        os.chmod(victim_dir, 0o777)
        os.chown(victim_dir, foe.pw_uid, foe.pw_gid)
        (victim_dir / "agent.log").symlink_to(target)
        os.lchown(victim_dir / "agent.log", foe.pw_uid, foe.pw_gid)
        r = subprocess.run([*as_user(victim), str(CLI_BIN), "agent", "start", "--agent-bin", str(AGENT_BIN)],
                           env=clean_env(), capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
        assert r.returncode != 0, r.stdout
        assert f"uid {foe.pw_uid}" in r.stderr, r.stderr
        assert target.read_text() == "keep me\n"
    finally:
        shutil.rmtree(victim_dir, ignore_errors=True)
        shutil.rmtree(target.parent, ignore_errors=True)
