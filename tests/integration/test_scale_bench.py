"""The 32-agent scale benchmark (bench/scale_bench.py, issue 21 item 4), reduced for CI: one step
spanning N = 2, 4 and 8 real agents becomes durable, and at N = 8 with one agent SIGKILLed during
persistence its holder uploads its part and the step restores byte-identical from the durable
tier alone. The agents run with --commit-fan-out 2, so that the commit goes down a real tree over
TCP (decision 102): depth 1, 2 and 3 at N = 2, 4 and 8. Every commit request down that tree has the
same size at every N: the members travel as runs of ring places, not as a list (decision 108)."""
import json
import subprocess
import sys
from pathlib import Path

from conftest import BIN_DIR

BENCH = Path(__file__).resolve().parents[2] / "bench" / "scale_bench.py"


def test_a_step_spanning_8_agents_becomes_durable_and_survives_a_kill_during_persistence():
    r = subprocess.run([sys.executable, str(BENCH), "--nodes", "2,4,8", "--kill", "1", "--commit-fan-out", "2",
                        "--json", "--build-dir", str(BIN_DIR.parent)], capture_output=True, text=True, timeout=600,
                       stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr[-6000:]
    results = {x["nodes"]: x for x in json.loads(r.stdout)["results"]}
    assert sorted(results) == [2, 4, 8]
    assert {n: x["depth"] for n, x in results.items()} == {2: 1, 4: 2, 8: 3}, results
    for x in results.values():
        # What the busiest agent moves is its own part and the part it holds, whatever N.
        assert x["busiest_mib"] == results[2]["busiest_mib"], results
        # The largest commit request any agent received does not grow with N (decision 108).
        assert x["request_bytes"] is not None and x["request_bytes"] == results[2]["request_bytes"], results
    last = results[8]
    assert len(last["killed"]) == 1 and last["takeover_log_lines"] >= 1, last
    assert last["restored_byte_identical"] is True, last
