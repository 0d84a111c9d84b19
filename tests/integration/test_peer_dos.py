"""Strangers on the peer port (issue 16, item 10): real agents, real sockets.

Before the fix, 64-100 idle TCP connections to an agent's peer port, none
sending more than a byte, made every replication to that node fail (every
handshake slot was held by a stranger), and a stranger that sent a byte and
stalled held its slot for up to twice the handshake timeout (more when it
trickled bytes). Now a pending handshake has a hard deadline (5 s by
default), one source holds at most 16 of the 128 slots, and a newcomer
makes room by dropping the oldest pending handshake (docs/peer-protocol.md,
"Strangers on the peer port").

Loopback only (127.0.0.1); every wait is bounded.
"""
import socket
import threading
import time

import pytest

from agent_harness import write_hostfile  # tests/harness, on the path from conftest.py

MiB = 1 << 20
HANDSHAKE_DEADLINE_S = 5.0  # TransportOptions::handshake_timeout's default


@pytest.fixture
def pair(agents, tmp_path):
    """Two agents n1, n2 sharing a hostfile and a secret: n2 holds n1's replicas."""
    secret = tmp_path / "secret"
    secret.write_bytes(b"0123456789abcdef-cluster-secret\n")
    secret.chmod(0o600)
    hostfile = tmp_path / "hosts"
    ports = write_hostfile(hostfile, 2)
    nodes = {}
    for i in range(2):
        nodes[f"n{i + 1}"] = agents("--memory-budget", "128MiB", "--node-id", f"n{i + 1}", "--peers", hostfile,
                                    "--peer-secret-file", secret)
    return nodes, {f"n{i + 1}": p for i, p in enumerate(ports)}


def open_strangers(port, n):
    """n TCP connections to the peer port; every other one sends one byte. None ever authenticates."""
    strangers = []
    for i in range(n):
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        if i % 2:
            s.sendall(b"T")
        strangers.append(s)
    return strangers


def closed_after(sock, limit):
    """Seconds until the server closed sock (end of stream or reset), or None after limit seconds."""
    start = time.monotonic()
    sock.settimeout(limit)
    try:
        while True:
            data = sock.recv(4096)
            if not data:
                return time.monotonic() - start
    except (ConnectionResetError, BrokenPipeError):
        return time.monotonic() - start
    except socket.timeout:
        return None


def test_hundred_idle_strangers_on_the_peer_port_do_not_stop_replication(pair, tmp_path):
    nodes, ports = pair
    strangers = open_strangers(ports["n2"], 100)
    try:
        for step in (1, 2):
            start = time.monotonic()
            # --replica-ack all (the default): the save returns only once n2 holds a verified replica.
            nodes["n1"].writer("--ns", "dos", "--step", step, "--objects", 2, "--size", MiB, timeout=60)
            took = time.monotonic() - start
            assert took < 10, f"the save with replication took {took:.1f}s with 100 strangers on n2's peer port"
            held = nodes["n2"].root / "replicas" / "n1" / "ns" / "dos" / f"step_{step:010d}"
            assert (held / "_tierckpt_manifest.json").exists(), nodes["n2"].log_text()[-3000:]
    finally:
        for s in strangers:
            s.close()
    log = nodes["n2"].log_text()
    # 84 strangers were dropped to make room (16 per source at most), but the log is rate-limited.
    assert "handshakes from 127.0.0.1 were pending" in log, log[-3000:]
    assert log.count("event=peer_handshake_failed") <= 20, log[-3000:]
    assert "event=replica_held origin=n1 ns=dos step=2" in log, log[-3000:]


def test_a_stranger_that_sends_one_byte_or_trickles_is_dropped_at_the_handshake_deadline(pair):
    nodes, ports = pair
    stalled = socket.create_connection(("127.0.0.1", ports["n2"]), timeout=5)
    stalled.sendall(b"T")
    trickler = socket.create_connection(("127.0.0.1", ports["n2"]), timeout=5)
    stop = threading.Event()

    def trickle():  # one byte a second: each byte is progress, the handshake never completes
        while not stop.is_set():
            try:
                trickler.sendall(b"T")
            except OSError:
                return
            stop.wait(1.0)

    t = threading.Thread(target=trickle)
    t.start()
    try:
        limit = HANDSHAKE_DEADLINE_S + 5
        took_stalled = closed_after(stalled, limit)
        took_trickler = closed_after(trickler, limit)
    finally:
        stop.set()
        t.join()
        stalled.close()
        trickler.close()
    for what, took in (("the stalled stranger", took_stalled), ("the trickling stranger", took_trickler)):
        assert took is not None, f"{what} was still connected {limit:.0f}s after connecting"
    # Both connected just before the clock started, so both deadlines fall ~5 s in.
    assert HANDSHAKE_DEADLINE_S - 0.5 <= took_stalled <= HANDSHAKE_DEADLINE_S + 3, took_stalled
    assert took_trickler <= HANDSHAKE_DEADLINE_S + 3, took_trickler  # measured after the first one closed
    # Each dropped handshake logs from its own thread, just after its socket closed.
    deadline = time.monotonic() + 10
    while nodes["n2"].log_text().count("did not complete the handshake within 5000 ms") < 2:
        assert time.monotonic() < deadline, nodes["n2"].log_text()[-3000:]
        time.sleep(0.05)

    # The port still serves agents.
    nodes["n1"].writer("--ns", "after", "--step", 1, "--objects", 1, "--size", MiB, timeout=60)
    assert (nodes["n2"].root / "replicas" / "n1" / "ns" / "after" / "step_0000000001").is_dir()
