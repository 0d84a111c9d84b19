"""Regression tests for the holes issue 37's attack found in tierckptd's HTTP API (docs/http-api.md)
and per-job durable bases, each against a real agent with real HTTP clients and raw sockets:

* a namespace deleted while one of its shards streams in: the upload's file is never recycled into
  another namespace's committed shard, and the agent never dies of SIGBUS (item 1);
* a GET racing a drop of its step, and a GET of a shard whose tmpfs file was truncated (items 3, 4);
* a web page in a local browser: a cross-site POST, a GET under a rebound DNS name (item 7);
* an HTTP namespace created over a native job's namespace (item 8);
* a second job binding the namespace of a first one to another durable base (item 9);
* ``Transfer-Encoding: CHUNKED`` with a longer ``Content-Length``, once answered 200 (item 11);
* clients that send their headers a byte at a time (slowloris): they held every worker of both
  HTTP endpoints for as long as they kept sending (item 10).
"""
from __future__ import annotations

import socket
import time

import pytest
import requests
import torch

from agent_harness import free_port
from tierckpt import _tierckpt
from tierckpt import agent as tc_agent
from tierckpt.torch import Checkpointer, CheckpointConfig

MiB = 1 << 20


@pytest.fixture
def http(agents):
    port = free_port()
    a = agents("--memory-budget", "512MiB", "--http-listen", f"127.0.0.1:{port}")
    a.base = f"http://127.0.0.1:{port}"
    a.port = port
    return a


def _alive(agent) -> None:
    assert agent.proc.poll() is None, f"tierckptd died ({agent.proc.returncode}):\n{agent.log_text()[-3000:]}"
    assert requests.get(f"{agent.base}/health", timeout=10).status_code == 200


def _namespace(agent, ns: str, ranks: int = 1) -> None:
    r = requests.post(f"{agent.base}/v1/cp/namespaces/{ns}", params={"num_ranks": ranks}, timeout=30)
    assert r.status_code == 200, r.text


def _post(agent, ns: str, step: int, data: bytes, rank: int = 0) -> requests.Response:
    return requests.post(f"{agent.base}/v1/cp/checkpoints/{ns}/{rank}/{step}", data=data, timeout=60)


def _open_upload(agent, ns: str, step: int, size: int) -> socket.socket:
    """A POST whose body is still being sent: the headers and nothing else."""
    s = socket.create_connection(("127.0.0.1", agent.port), timeout=30)
    s.sendall((f"POST /v1/cp/checkpoints/{ns}/0/{step} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
               f"Content-Type: application/octet-stream\r\nContent-Length: {size}\r\n\r\n").encode())
    return s


def _status_of(s: socket.socket) -> int:
    s.settimeout(60)
    head = b""
    while b"\r\n" not in head:
        chunk = s.recv(4096)
        if not chunk:
            return 0
        head += chunk
    return int(head.split(b" ", 2)[1])


def _wait_uploading(agent, ns: str, step: int) -> None:
    """Until the agent holds the step being written (the upload's object exists)."""
    deadline = time.time() + 20
    while time.time() < deadline:
        if agent.steps(ns).get(step, {}).get("memory") == "writing":
            return
        time.sleep(0.02)
    raise AssertionError(f"the upload of {ns}/{step} never began:\n{agent.log_text()[-2000:]}")


@pytest.mark.parametrize("b_size", [8 * MiB, 4 * MiB + 4096], ids=["same-size", "smaller"])
def test_a_namespace_deleted_mid_upload_never_writes_into_another_namespaces_step(http, b_size):
    """Item 1. Old code: the upload's file went to the pool while the upload thread still wrote through
    its mapping; B's next shard took it, so A's late bytes landed in B's committed shard (same size) or
    the agent died of SIGBUS (smaller)."""
    _namespace(http, "A")
    _namespace(http, "B")
    a_size = 8 * MiB
    up = _open_upload(http, "A", 1, a_size)
    up.sendall(b"a" * (a_size // 2))
    _wait_uploading(http, "A", 1)
    r = requests.delete(f"{http.base}/v1/cp/namespaces/A", timeout=30)
    assert r.status_code == 200, r.text
    b_data = bytes(range(256)) * (b_size // 256) + b"b" * (b_size % 256)
    r = _post(http, "B", 1, b_data)
    assert r.status_code == 200 and r.json()["committed"], r.text
    try:
        up.sendall(b"a" * (a_size // 2))  # the rest of A's body
        status = _status_of(up)
    except OSError:
        status = 0  # the agent may close the connection first: what matters is B and the agent
    finally:
        up.close()
    assert status != 200, "an upload whose namespace was deleted under it was answered 200"
    _alive(http)
    got = requests.get(f"{http.base}/v1/cp/checkpoints/B/0/1", timeout=60)
    assert got.status_code == 200, got.text
    assert got.content == b_data, "B's committed shard changed after A's upload went on"
    assert http.cli("verify", "B", 1, check=False).returncode == 0
    assert http.steps("A") == {}


def test_a_get_racing_a_drop_of_its_step_sends_the_bytes_it_hashed(http):
    """Item 3. Old code: GET mapped the file without holding its step; a DELETE and new saves meanwhile
    recycled the file, so the rest of the body was another shard's bytes (or SIGBUS)."""
    _namespace(http, "G")
    _namespace(http, "H")
    size = 64 * MiB  # far more than the socket buffers: most of it is unsent while we wait
    data = b"g" * size
    assert _post(http, "G", 1, data).status_code == 200
    s = socket.create_connection(("127.0.0.1", http.port), timeout=60)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    s.sendall(b"GET /v1/cp/checkpoints/G/0/1 HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
    first = s.recv(4096)
    assert first.startswith(b"HTTP/1.1 200"), first[:200]
    r = requests.delete(f"{http.base}/v1/cp/checkpoints/G/0/1", timeout=30)
    assert r.status_code == 200 and r.json()["step_dropped"], r.text
    for step, n in ((1, size // 2), (2, size)):  # saves that would take the dropped file
        assert _post(http, "H", step, b"h" * n).status_code == 200
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 * MiB)  # now read it all, fast
    body = first.split(b"\r\n\r\n", 1)[1]
    while True:
        chunk = s.recv(1 << 20)
        if not chunk:
            break
        body += chunk
    s.close()
    _alive(http)
    assert len(body) == size, f"the body ended after {len(body)} of {size} bytes"
    assert body == data, "the GET sent bytes of another shard after its step was dropped"


def test_a_get_of_a_truncated_shard_is_an_error_not_a_dead_agent(http):
    """Item 4. Old code: the GET mapped the manifest's size over a shorter file and died of SIGBUS."""
    _namespace(http, "T")
    assert _post(http, "T", 1, b"t" * (4 * MiB)).status_code == 200
    path = http.object_path("T", 1, "rank_0")
    with open(path, "r+b") as f:
        f.truncate(MiB)
    r = requests.get(f"{http.base}/v1/cp/checkpoints/T/0/1", timeout=60)
    assert r.status_code >= 400, r.status_code
    assert "is corrupt" in r.text or "holds 1048576 bytes" in r.text, r.text
    _alive(http)


def test_requests_a_web_page_can_make_are_refused(http):
    """Item 7. Old code: a cross-site POST /v1/cp/cluster/reset was obeyed, and a GET with a foreign Host
    (DNS rebinding) returned a shard's bytes."""
    _namespace(http, "W")
    assert _post(http, "W", 1, b"secret").status_code == 200
    r = requests.post(f"{http.base}/v1/cp/cluster/reset", headers={"Origin": "http://evil.example"}, timeout=30)
    assert r.status_code == 403 and "web page" in r.text, r.text
    r = requests.get(f"{http.base}/v1/cp/checkpoints/W/0/1", headers={"Host": "evil.example:9200"}, timeout=30)
    assert r.status_code == 403 and "evil.example" in r.text and "--http-host" in r.text, r.text
    assert b"secret" not in r.content
    assert 1 in http.steps("W")
    # The library's own default host, and plain addresses, are served.
    r = requests.get(f"{http.base}/v1/cp/checkpoints/W/0/1", timeout=30,
                     headers={"Host": "ai-toolkit-gossip-headless.aws-hyperpod.svc.cluster.local:9200"})
    assert r.status_code == 200 and r.content == b"secret", r.text


def test_an_agent_started_with_http_host_serves_that_name(agents):
    port = free_port()
    a = agents("--memory-budget", "128MiB", "--http-listen", f"127.0.0.1:{port}", "--http-host", "ckpt.internal")
    r = requests.get(f"http://127.0.0.1:{port}/health", headers={"Host": "ckpt.internal"}, timeout=30)
    assert r.status_code == 200, r.text
    bad = tc_agent.find_binary("tierckptd")
    import subprocess
    out = subprocess.run([bad, "--root", "/nonexistent", "--http-listen", "127.0.0.1:1", "--http-host", "a b"],
                         capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    assert out.returncode != 0 and "--http-host entry" in out.stderr, out.stderr


def test_chunked_in_upper_case_with_a_longer_content_length_is_refused_and_keeps_nothing(http):
    """Item 11. Old code: the route read the chunked body, found it short and answered 200 with an
    empty body, which the HyperPod client takes for a stored shard."""
    _namespace(http, "C")
    s = socket.create_connection(("127.0.0.1", http.port), timeout=30)
    s.sendall(b"POST /v1/cp/checkpoints/C/0/1 HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: CHUNKED\r\n"
              b"Content-Length: 1000\r\n\r\n5\r\nhello\r\n0\r\n\r\n")
    status = _status_of(s)
    s.close()
    assert status == 400, status
    assert http.steps("C") == {}
    _alive(http)


def test_creating_an_http_namespace_over_a_native_jobs_steps_is_refused(http):
    """Item 8. Old code: the create answered 200 and applied its steps_retained at once, dropping the
    native job's older steps; a DELETE or reset then dropped the rest."""
    cfg = CheckpointConfig("native", socket=http.socket, auto_start=False, keep_last=5)
    ck = Checkpointer(cfg)
    for step in (1, 2, 3):
        ck.save(step, {"w": torch.full((1024,), float(step))})
    r = requests.post(f"{http.base}/v1/cp/namespaces/native", params={"num_ranks": 1, "steps_retained": 1},
                      timeout=30)
    assert r.status_code == 409 and "tierckpt job" in r.text, r.text
    assert requests.post(f"{http.base}/v1/cp/cluster/reset", timeout=30).status_code == 200
    assert set(http.steps("native")) == {1, 2, 3}


def test_a_second_job_cannot_move_the_first_jobs_namespace_to_its_base(agents, tmp_path):
    """Item 9. Old code: job B's bind replaced job A's accepted base, and A's later persists landed in
    B's base with no error."""
    allowed = tmp_path / "bases"
    allowed.mkdir()
    a = agents("--memory-budget", "128MiB", "--durable-allow", f"{allowed}/*")
    job_a = CheckpointConfig("shared", socket=a.socket, auto_start=False, durable=str(allowed / "a"))
    Checkpointer(job_a).save(1, {"w": torch.ones(16)})
    c = _tierckpt.Client.connect(a.socket, client_name="job-b")
    with pytest.raises(RuntimeError, match="Two jobs are using one namespace"):
        c.bind_durable("shared", str(allowed / "b"))
    out = a.cli("persist", "shared", 1, "--wait", "--timeout", "60").stdout
    assert (allowed / "a" / "shared" / "step_0000000001").is_dir()
    assert str((allowed / "a").resolve()) in out, out  # the namespace's own base, not the default
    assert not (allowed / "b").exists()


def _dripper(port: int, path: str) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    s.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n".encode())
    return s


def test_clients_dripping_their_headers_cannot_hold_either_http_endpoint(agents):
    """Item 10. Old code: 32 clients sending a header byte every second held all 32 workers of
    --http-listen (a per-read timeout, no deadline per request), and 2 held --metrics-listen's:
    /health and /healthz went unanswered for as long as they kept sending. Now no worker waits on a
    client's headers, and a header block not whole after 10 s (5 s on the metrics port) gets 408."""
    port, metrics_port = free_port(), free_port()
    a = agents("--memory-budget", "256MiB", "--http-listen", f"127.0.0.1:{port}",
               "--metrics-listen", f"127.0.0.1:{metrics_port}")
    a.base, a.port = f"http://127.0.0.1:{port}", port
    drippers = [_dripper(port, "/health") for _ in range(40)]
    drippers += [_dripper(metrics_port, "/healthz") for _ in range(4)]
    started = time.monotonic()
    cut_off: set[int] = set()
    answers: dict[int, bytes] = {}
    for second in range(3):  # while they drip, every other client is served at once
        for i, s in enumerate(drippers):
            if i not in cut_off:
                try:
                    s.send(b"X")
                except OSError:
                    cut_off.add(i)
        assert requests.get(f"{a.base}/health", timeout=5).status_code == 200, second
        assert requests.get(f"http://127.0.0.1:{metrics_port}/healthz", timeout=5).status_code == 200, second
        time.sleep(1)
    # Keep dripping; each is answered 408 and closed once its headers are late.
    while len(answers) < len(drippers) and time.monotonic() - started < 30:
        for i, s in enumerate(drippers):
            if i in answers:
                continue
            s.settimeout(0.05)
            try:
                chunk = s.recv(4096)
                answers[i] = chunk
            except (TimeoutError, socket.timeout):
                try:
                    s.send(b"X")
                except OSError as e:
                    answers[i] = repr(e).encode()
            except OSError as e:
                answers[i] = repr(e).encode()
        time.sleep(0.5)
    for s in drippers:
        s.close()
    assert len(answers) == len(drippers), f"{len(drippers) - len(answers)} drippers still held after 30 s"
    late = [i for i, body in answers.items() if not body.startswith(b"HTTP/1.1 408 ")]
    assert not late, {i: answers[i][:200] for i in late}
    assert b"--metrics-listen" in answers[len(drippers) - 1], answers[len(drippers) - 1]
    _alive(a)
