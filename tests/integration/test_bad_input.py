"""Malformed frames, hostile names, oversized requests, foreign users."""
import os
import re
import shutil
import socket
import struct
import subprocess
import tempfile
from pathlib import Path

import pytest

MAGIC = 0x504B4354
# kProtocolVersion, read from src/wire/protocol.h so a version bump needs no edit here.
VERSION = int(re.search(r"kProtocolVersion = (\d+);",
                        (Path(__file__).resolve().parents[2] / "src/wire/protocol.h").read_text()).group(1))


def frame(msg_type, payload=b"", request_id=1, magic=MAGIC, version=VERSION, length=None):
    n = len(payload) if length is None else length
    return struct.pack("<IHHII", magic, version, msg_type, request_id, n) + payload


def wire_str(s: bytes):
    return struct.pack("<I", len(s)) + s


def hello():
    return frame(1, struct.pack("<I", os.getpid()) + wire_str(b"pytest") + wire_str(b""))


def connect(agent):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(10)
    s.connect(str(agent.socket))
    return s


def read_response(s):
    hdr = b""
    while len(hdr) < 16:
        chunk = s.recv(16 - len(hdr))
        if not chunk:
            return None
        hdr += chunk
    magic, version, mtype, rid, n = struct.unpack("<IHHII", hdr)
    body = b""
    while len(body) < n:
        chunk = s.recv(n - len(body))
        if not chunk:
            break
        body += chunk
    code = struct.unpack("<I", body[:4])[0]
    return mtype, rid, code, body


def closed(s):
    try:
        while True:
            data = s.recv(4096)
            if not data:
                return True
    except (ConnectionResetError, socket.timeout):
        return True


def still_serving(agent):
    agent.cli("ls")
    return agent.proc.poll() is None


@pytest.mark.parametrize("raw", [
    frame(1, magic=0xDEADBEEF),
    frame(1, version=99),
    frame(1, length=1 << 30),  # oversized: rejected from the header alone
    b"GET / HTTP/1.1\r\n\r\n",
])
def test_malformed_frames_close_only_that_connection(agent, raw):
    bystander = connect(agent)
    bystander.sendall(hello())
    assert read_response(bystander)[2] == 0
    s = connect(agent)
    s.sendall(raw)
    assert closed(s)
    assert still_serving(agent)
    # The other connection is unaffected.
    bystander.sendall(frame(12, request_id=2))  # Stats
    resp = read_response(bystander)
    assert resp is not None and resp[2] == 0


def test_request_before_hello_is_rejected(agent):
    s = connect(agent)
    s.sendall(frame(12))  # Stats without Hello
    resp = read_response(s)
    assert resp is None or resp[2] != 0
    assert still_serving(agent)


def test_truncated_payload_and_trailing_bytes(agent):
    s = connect(agent)
    s.sendall(hello())
    assert read_response(s)[2] == 0
    # BeginStep with a string length pointing past the payload.
    s.sendall(frame(2, struct.pack("<I", 1000) + b"abc"))
    resp = read_response(s)
    assert resp is None or resp[2] == 10  # kProtocolError
    assert still_serving(agent)


@pytest.mark.parametrize("ns", ["../escape", "a/b", "", "x" * 200, "bad name"])
def test_hostile_namespaces(agent, ns):
    r = agent.writer("--ns", ns, "--step", 1, "--objects", 1, "--size", 10, check=False)
    assert r.returncode != 0
    assert "namespace" in r.stderr
    assert not any(p.name == "escape" for p in agent.root.parent.iterdir())
    assert still_serving(agent)


def test_hostile_object_names_via_cli_save(agent, tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "bad name.bin").write_bytes(b"x")
    r = agent.cli("save", "ok", 1, "--from", src, check=False)
    assert r.returncode != 0
    assert "bad name.bin" in r.stderr
    assert still_serving(agent)


def test_step_out_of_range(agent):
    r = agent.writer("--ns", "ok", "--step", 10**12, "--objects", 1, "--size", 10, check=False)
    assert r.returncode != 0 and "step" in r.stderr


def test_oversized_object_request(agent):
    r = agent.writer("--ns", "ok", "--step", 1, "--objects", 1, "--size", 1 << 40, "--direct",
                     check=False)
    assert r.returncode != 0
    assert "budget" in r.stderr or "too large" in r.stderr
    assert still_serving(agent)


def test_foreign_user_is_rejected(agents):
    if os.getuid() != 0:
        pytest.skip("needs root to act as another user")
    open_dir = Path(tempfile.mkdtemp(prefix="tierckpt-sock-"))
    os.chmod(open_dir, 0o755)
    agent = agents("--memory-budget", "64MiB", socket_path=open_dir / "agent.sock")
    os.chmod(agent.socket, 0o666)  # let the kernel through; the agent must still refuse

    def as_nobody():
        os.setgid(65534)
        os.setuid(65534)

    code = ("import socket,struct,sys\n"
            "s=socket.socket(socket.AF_UNIX);s.settimeout(10);s.connect(sys.argv[1])\n"
            "p=struct.pack('<I',1)+struct.pack('<I',1)+b'x'+struct.pack('<I',0)\n"
            "try:\n"
            f"    s.sendall(struct.pack('<IHHII',0x504B4354,{VERSION},1,1,len(p))+p)\n"
            "    d=s.recv(64)\n"
            "except (ConnectionResetError, BrokenPipeError):\n"
            "    d=b''\n"
            "print('ok' if d and struct.unpack('<I',d[16:20])[0]==0 else 'rejected')\n")
    r = subprocess.run(["python3", "-c", code, str(agent.socket)], capture_output=True, text=True,
                       preexec_fn=as_nobody, timeout=30)
    assert r.stdout.split() == ["rejected"], r.stdout + r.stderr
    assert still_serving(agent)
    assert "65534" in agent.log_text()
    shutil.rmtree(open_dir, ignore_errors=True)
