"""bench/redundancy_bench.py's smoke run: three clusters of six real agents (none, replicas:2, rs:4+2),
4 MiB per agent, one round, one replacement restored per redundant configuration, ec_bench on 1 MiB pieces.

It runs the benchmark end to end (the interleaved commits, the rs:4+2 steps checked redundant on every
member, the memory walk, the replacements restored from parity and from a replica, the JSON report) so
that CI notices when the benchmark breaks. No timing is asserted; the memory each scheme holds is, since it
is fixed by the layout: 1x, 2x and, for rs:4+2 over six agents (a group of four and a group of two, each
with two parity pieces as long as a part), 10/6 of the state.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "harness"))
from agent_harness import bin_dir_from_env  # noqa: E402


def test_redundancy_bench_smoke(tmp_path):
    build = bin_dir_from_env().parent
    if not (build / "bench" / "ec_bench").exists():
        pytest.skip(f"{build}/bench/ec_bench is not built (scripts/setup.sh release)")
    r = subprocess.run([sys.executable, str(REPO / "bench" / "redundancy_bench.py"), "--save-size", "4MiB",
                        "--objects", "2", "--rounds", "1", "--warmup", "0", "--restores", "1", "--ec-piece-mib", "1",
                        "--ec-rounds", "1", "--build-dir", str(build), "--json"],
                       capture_output=True, text=True, timeout=180, cwd=tmp_path)
    assert r.returncode == 0, f"bench/redundancy_bench.py failed ({r.returncode}):\n{r.stdout}\n{r.stderr[-4000:]}"
    res = json.loads(r.stdout)["results"]
    c = res["configs"]
    assert list(c) == ["none", "replicas2", "rs42"]
    for name, x in c.items():
        assert len(x["rounds"]) == 1 and x["commit_median_s"] > 0, name
        assert x["rounds"][0]["settled"], (name, x["rounds"])
    for name in ("replicas2", "rs42"):
        assert c[name]["protected_median_s"] > 0 and len(c[name]["restore_s"]) == 1, name
    expected = {"none": 1.0, "replicas2": 2.0, "rs42": res["rs42_layout"]["expected_x_state"]}
    assert expected["rs42"] == pytest.approx(10 / 6)
    for name, want in expected.items():
        # Manifests, parity records and 4 KiB blocks add a little; 2 % of 24 MiB is ~490 KiB.
        assert c[name]["memory"]["committed_x_state"] == pytest.approx(want, rel=0.02), (name, c[name]["memory"])
    assert c["none"]["memory"]["bytes"]["replica_tier"] == 0 and c["none"]["memory"]["bytes"]["parity"] == 0
    assert c["rs42"]["memory"]["bytes"]["replica_tier"] == 0 and c["replicas2"]["memory"]["bytes"]["parity"] == 0
    # Where the holders' folds went (decisions 148-149: parity_folded's claim/read/hash/wait/update ms,
    # parity_sealed's ms): a change of those log lines must not silently empty the report.
    folds = c["rs42"]["fold_breakdown_median_ms"]
    assert set(folds) == {"ms", "claim_ms", "read_ms", "hash_ms", "wait_ms", "update_ms"} and folds["read_ms"] > 0
    assert c["rs42"]["seal_median_ms"] > 0
    assert res["encode"]["k"] == 4 and res["encode"]["m"] == 2 and res["encode"]["encode_x_memcpy"] > 0
