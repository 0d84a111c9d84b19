"""Operations (docs/operations.md): the agent's Prometheus endpoint scraped by a real
Prometheus server (Debian's `prometheus`, installed by scripts/setup.sh), the
exposition checked by `promtool`, and the series moving after a save."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import urllib.parse
import urllib.request

import pytest
from agent_harness import free_port
from conftest import mounted_tmpfs


def http_get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def require(tool: str) -> str:
    path = shutil.which(tool)
    if path is None:
        pytest.fail(f"{tool} is not installed: run scripts/setup.sh (it installs Debian's prometheus)", pytrace=False)
    return path


class Prometheus:
    def __init__(self, tmp_path, target: str):
        self.port = free_port()
        self.dir = tmp_path / "prometheus"
        self.dir.mkdir()
        config = self.dir / "prometheus.yml"
        config.write_text("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                          "scrape_configs:\n  - job_name: tierckpt\n    static_configs:\n"
                          f"      - targets: ['{target}']\n")
        self.log = self.dir / "prometheus.log"
        with open(self.log, "wb") as logf:
            self.proc = subprocess.Popen(
                [require("prometheus"), f"--config.file={config}", f"--storage.tsdb.path={self.dir / 'data'}",
                 f"--web.listen-address=127.0.0.1:{self.port}"],
                stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT)

    def query(self, expr: str) -> list[dict]:
        url = f"http://127.0.0.1:{self.port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        try:
            code, body = http_get(url)
        except OSError:
            return []
        if code != 200:
            return []
        return json.loads(body)["data"]["result"]

    def value(self, expr: str) -> float | None:
        result = self.query(expr)
        return float(result[0]["value"][1]) if result else None

    def wait_for(self, expr: str, pred, timeout=60.0, what=""):
        deadline = time.time() + timeout
        v = None
        while time.time() < deadline:
            v = self.value(expr)
            if v is not None and pred(v):
                return v
            assert self.proc.poll() is None, self.log.read_text()[-3000:]
            time.sleep(0.5)
        raise AssertionError(f"{what or expr}: last value {v} after {timeout} s\n{self.log.read_text()[-2000:]}")

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def test_prometheus_scrapes_the_agent_and_the_series_move_after_a_save(agents, tmp_path):
    port = free_port()
    agent = agents("--memory-budget", "128MiB", "--metrics-listen", f"127.0.0.1:{port}")
    code, health = http_get(f"http://127.0.0.1:{port}/healthz")
    assert (code, health) == (200, "ok\n")
    code, text = http_get(f"http://127.0.0.1:{port}/metrics")
    assert code == 200 and "tierckpt_memory_budget_bytes 134217728\n" in text, text[:2000]
    lint = subprocess.run([require("promtool"), "check", "metrics"], input=text, capture_output=True, text=True)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    assert http_get(f"http://127.0.0.1:{port}/nothing")[0] == 404

    prom = Prometheus(tmp_path, f"127.0.0.1:{port}")
    try:
        prom.wait_for('up{job="tierckpt"}', lambda v: v == 1, what="Prometheus scraping the agent")
        assert prom.value('tierckpt_commit_total{result="ok"}') == 0
        assert prom.value("tierckpt_memory_used_bytes") == 0

        src = tmp_path / "ckpt"
        src.mkdir()
        (src / "a.distcp").write_bytes(b"x" * (3 << 20))
        (src / ".metadata").write_bytes(b"m" * 100)
        agent.cli("save", "ops", 7, "--from", src, "--wait-durable", "--timeout", "60")

        prom.wait_for('tierckpt_commit_total{result="ok"}', lambda v: v == 1)
        prom.wait_for('tierckpt_steps_committed_total{namespace="ops"}', lambda v: v == 1)
        prom.wait_for("tierckpt_commit_bytes_total", lambda v: v == (3 << 20) + 100)
        prom.wait_for('tierckpt_persist_total{result="ok"}', lambda v: v == 1)
        prom.wait_for("tierckpt_persist_seconds_count", lambda v: v == 1)
        prom.wait_for("tierckpt_memory_used_bytes", lambda v: v >= (3 << 20))
        prom.wait_for('tierckpt_memory_steps{state="committed"}', lambda v: v == 1)
        prom.wait_for("tierckpt_memory_free_bytes", lambda v: v <= (128 << 20) - (3 << 20))
        # An eviction by retention shows under its reason.
        for step in (8, 9, 10):
            agent.cli("save", "ops", step, "--from", src)
        prom.wait_for('tierckpt_steps_dropped_total{reason="retention"}', lambda v: v >= 1)
    finally:
        prom.stop()


def test_agent_status_shows_the_background_caps_and_the_scrub(agents, tmp_path):
    """`tierckpt agent status` reports --persist-rate, --replicate-rate, --background-priority and
    the scrub (interval and its counters), in JSON and in the human output; a default agent its defaults."""
    plain = agents("--memory-budget", "64MiB")
    status = plain.cli_json("agent", "status")
    assert (status["persist_rate_bytes"], status["replicate_rate_bytes"], status["background_priority"]) == (0, 0, "low")
    assert status["scrub"] == {"interval_ms": 600_000, "passes": 0, "last_pass_unix_ms": None,
                               "objects": 0, "corrupt": 0, "repaired": 0}, status
    text = plain.cli("agent", "status").stdout
    assert "background     persist unlimited, replicate unlimited, priority low\n" in text, text
    assert "scrub          every 10m; 0 pass(es); 0 object(s) hashed, 0 corrupt, 0 repaired\n" in text, text

    capped = agents("--memory-budget", "64MiB", "--persist-rate", "50MiB", "--replicate-rate", "20MiB",
                    "--background-priority", "idle", "--scrub-interval", "1s")
    src = tmp_path / "ckpt"
    src.mkdir()
    (src / "a.distcp").write_bytes(b"x" * (1 << 20))
    (src / ".metadata").write_bytes(b"m" * 100)
    capped.cli("save", "ops", 1, "--from", src)
    deadline = time.monotonic() + 30
    while True:  # the first pass after the save hashes both objects
        status = capped.cli_json("agent", "status")
        if status["scrub"]["objects"] >= 2 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert (status["persist_rate_bytes"], status["replicate_rate_bytes"], status["background_priority"]) == (
        50 << 20, 20 << 20, "idle"), status
    scrub = status["scrub"]
    assert scrub["interval_ms"] == 1000 and scrub["passes"] >= 1 and scrub["objects"] >= 2, scrub
    assert (scrub["corrupt"], scrub["repaired"]) == (0, 0), scrub
    assert scrub["last_pass_unix_ms"] >= status["started_unix_ms"], scrub
    text = capped.cli("agent", "status").stdout
    assert "background     persist 50.0 MiB/s, replicate 20.0 MiB/s, priority idle\n" in text, text
    assert "scrub          every 1s; " in text and ", the last ended 20" in text, text


def _tmpfs_huge_option(mount_point: str) -> str:
    """The huge= option /proc/self/mounts lists for mount_point ("never" when absent)."""
    for line in open("/proc/self/mounts"):
        fields = line.split()
        if fields[1] == mount_point and fields[2] == "tmpfs":
            opts = dict(o.split("=", 1) if "=" in o else (o, "") for o in fields[3].split(","))
            return opts.get("huge", "never")
    raise AssertionError(f"{mount_point} is not a tmpfs mount here")


def test_agent_status_says_whether_its_tmpfs_hands_out_huge_pages(agents, tmp_path):
    """`tierckpt agent status` names the huge= mode of the tmpfs under --root (docs/agent.md, "Huge
    pages for the memory tier"): /dev/shm as mounted here, and a tmpfs this test mounts with
    huge=within_size (root only: mount(2))."""
    plain = agents("--memory-budget", "64MiB")
    expected = _tmpfs_huge_option("/dev/shm")
    assert plain.cli_json("agent", "status")["tmpfs_huge_pages"] == expected
    text = plain.cli("agent", "status").stdout
    assert f"  huge pages     {expected}" in text, text
    if expected == "never":
        assert 'docs/agent.md, "Huge pages"' in text, text

    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root; the /dev/shm half ran")
    with mounted_tmpfs(tmp_path / "huge", "size=256m,huge=within_size") as mnt:
        huge = agents("--memory-budget", "64MiB", root=mnt / "tier")
        assert huge.cli_json("agent", "status")["tmpfs_huge_pages"] == "within_size"
        assert "  huge pages     within_size\n" in huge.cli("agent", "status").stdout
        assert "tmpfs_huge_pages=within_size" in huge.log_text()
        huge.kill()
