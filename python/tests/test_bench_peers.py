"""bench/peers.py's smoke run: tierckpt and stock DCP only, 16 MiB, 3 rounds, no PyPI installs.

It runs the benchmark end to end (its private tierckptd, one torchrun of 2 gloo ranks per
workload, the interleaved rounds, the checked loads, the JSON report) with this interpreter, so
that CI notices when the benchmark breaks or a load comes back wrong. No timing is asserted.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))
import peers_rank  # noqa: E402  (bench/peers_rank.py)
METHODS = ["memcpy", "tierckpt_thread", "tierckpt_process", "tierckpt_tuned", "tierckpt_direct", "dcp_thread",
           "dcp_process"]


def test_peers_smoke(tmp_path):
    out = tmp_path / "peers.json"
    r = subprocess.run([sys.executable, str(REPO / "bench" / "peers.py"), "--methods", "tierckpt,dcp",
                        "--workload", "a", "--size-mib", "16", "--rounds", "3", "--no-install",
                        "--json", str(out), "--timeout-s", "240", "--settle-s", "0.1"],
                       capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert r.returncode == 0, f"bench/peers.py failed ({r.returncode}):\n{r.stdout}\n{r.stderr[-4000:]}"
    report = json.loads(out.read_text())
    for wl in ("a",):
        res = report["workloads"][wl]
        assert list(res["methods"]) == METHODS, res["methods"].keys()
        for name, m in res["methods"].items():
            assert m["status"] == "ok", (wl, name, m["status"])
            assert m["loads_correct"], (wl, name)
            assert len(m["rounds"]["save"]) == 3 and len(m["rounds"]["load"]) == 3, (wl, name)
            assert all(x["correct"] for x in m["rounds"]["load"]), (wl, name)
            assert m["steady_commit_s"] > 0 and m["steady_load_s"] > 0
        assert res["tensors_per_rank"] == 16
        assert res["methods"]["tierckpt_thread"]["vs_tierckpt_thread"]["steady_commit_s"] == 1.0
    assert "tierckpt" in r.stdout and "SKIPPED" not in r.stdout


def test_model_workload_is_a_transformer_with_adamw_state():
    """Workload (c), built small: >= 1,500 tensors per rank, parameters plus exp_avg, exp_avg_sq, step."""
    state = peers_rank.model_state(0, 16 << 20)["rank0"]
    tensors = peers_rank.tensors_of(state)
    assert len(tensors) >= 1500
    assert set(state) == {"model", "optim"} and set(state["model"]) == set(state["optim"])
    for name, s in state["optim"].items():
        assert set(s) == {"step", "exp_avg", "exp_avg_sq"}, name
        assert s["exp_avg"].shape == state["model"][name].shape
        assert float(s["step"]) == 1.0 and s["exp_avg_sq"].abs().sum() > 0


def test_a_wrong_load_is_caught():
    """The check every load goes through flags one changed element and a missing key."""
    state = peers_rank.large_state(0, 1 << 20, count=4)
    dest = peers_rank.zeros_like_state(state)
    assert peers_rank.mismatches(dest, state)  # still zero
    peers_rank.copy_into(dest, state)
    assert peers_rank.mismatches(dest, state) == []
    dest["rank0"]["t02"].view(-1)[7] += 1
    assert peers_rank.mismatches(dest, state) == ["rank0.t02"]
    del dest["rank0"]["t03"]
    assert peers_rank.mismatches(dest, state) == ["<keys differ>"]
