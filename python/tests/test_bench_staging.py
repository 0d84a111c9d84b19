"""bench/staging_bench.py's smoke run: 16 MiB objects, 4 steps, on /dev/shm and on a huge=always tmpfs
it mounts (CI runs as root; a strict run fails rather than skips without it), each with a roomy budget and
a tight one (every save evicts a step: decision 129). No timing is asserted:
CI notices when the benchmark breaks, and that each root really saved every step."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def test_staging_bench_smoke(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("mounts a huge=always tmpfs (root only)")
    out = tmp_path / "staging.json"
    r = subprocess.run([sys.executable, str(REPO / "bench" / "staging_bench.py"), "--size", "16MiB", "--steps", "4",
                        "--pause", "0", "--json", str(out)], capture_output=True, text=True, timeout=180, cwd=tmp_path)
    assert r.returncode == 0, f"bench/staging_bench.py failed ({r.returncode}):\n{r.stdout}\n{r.stderr[-4000:]}"
    report = json.loads(out.read_text())
    assert sorted(report["roots"]) == ["/dev/shm roomy", "/dev/shm tight", "huge roomy", "huge tight"]
    for name, res in report["roots"].items():
        assert len(res["rows"]) == 4 and all(row["copy"] > 0 for row in res["rows"]), (name, res)
    assert "(create+copy+seal)/copy" in r.stdout
    assert "staging-bench" not in subprocess.run(["mount"], capture_output=True, text=True).stdout  # unmounted
