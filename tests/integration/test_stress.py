"""A bounded fault campaign (tests/stress/tierckpt_stress.py, docs/reliability.md).

Two runs of tierckpt-stress against 4 real agents, each on a host of its own
(network namespaces), with every fault kind (the link kinds included) and a real
DCP job beside the C++ writers: a fixed seed, then a fresh random one (printed,
so a failure replays with `--seed`). Each fails the test
on the first broken invariant of the oracle, with the program's report (the
invariant, the schedule's last events, the agents' log lines around it).
Together they stay under about 3 minutes on 2 shared cores.
"""
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import BIN_DIR

STRESS = Path(__file__).resolve().parents[1] / "stress" / "tierckpt_stress.py"


def run_campaign(tmp_path, seed, faults, duration, *extra, min_rounds=10, min_acked=20):
    out = tmp_path / f"summary-{seed}.json"
    env = dict(os.environ, TIERCKPT_BIN_DIR=str(BIN_DIR))
    # --min-rounds: on a loaded machine (CI runs this beside the Ray tests and a niced sanitizer
    # build) a round can take 15 s, so the campaign runs past its duration until min_rounds are done
    # instead of failing for having done fewer.
    r = subprocess.run([sys.executable, str(STRESS), "--seed", str(seed), "--faults", str(faults),
                        "--duration", str(duration), "--min-rounds", str(min_rounds), "--json", str(out),
                        *map(str, extra)],
                       capture_output=True, text=True, timeout=duration + 300, env=env)
    print(f"tierckpt-stress seed {seed}: exit {r.returncode}")
    assert r.returncode == 0, (f"tierckpt-stress --seed {seed} broke an invariant (replay: python {STRESS} "
                               f"--seed {seed} --faults {faults} {' '.join(map(str, extra))}):\n{r.stdout[-12000:]}\n{r.stderr[-4000:]}")
    summary = json.loads(out.read_text())
    print(f"tierckpt-stress seed {seed}: {summary['rounds']} rounds, {summary['steps_acknowledged']} steps acknowledged")
    # The campaign did something: faults of several kinds, steps acknowledged and read back.
    assert summary["rounds"] >= min_rounds, summary
    assert len(summary["faults_injected"]) >= 4, summary
    assert summary["steps_acknowledged"] >= min_acked, summary
    assert summary["oracle"]["restores_ok"] >= summary["steps_acknowledged"], summary
    assert summary["wrong_bytes"] == 0 and summary["steps_lost"] == 0 and not summary["violations"], summary
    return summary


def needs_netns():
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "harness"))
    from netns import unavailable  # noqa: PLC0415

    why = unavailable()
    if why:
        pytest.skip(why)


def test_fixed_seed_campaign_breaks_no_invariant(tmp_path):
    """Every fault kind, each agent on a host of its own (a network namespace on one switch,
    tests/harness/netns.py): links cut, split and degraded while saves replicate, beside kills,
    stops, replacements and corruptions (issue 42), with C++ writers and a real DCP job whose steps
    span two agents. Saves whose holder is across a cut must fail with the holder named, and
    nothing acknowledged may be lost or read back wrong once the links heal."""
    needs_netns()
    # Seed 136's first rounds: agent_replace, agent_stop, link_lossy, corrupt_durable, link_split,
    # link_split, corrupt_durable, with the DCP job in three of the first six. 14 rounds or 90 s,
    # whichever ends first, at least 7 (decision 137: since decision 128 a round takes ~3-4 s, and 60
    # rounds in 90 s tripled the CPU this test took beside the Ray tests; 14 rounds take ~60 s).
    summary = run_campaign(tmp_path, 136, 14, 90, "--dcp", "--network", "netns", min_rounds=7, min_acked=15)
    assert summary["network"] == "netns" and summary["dcp"], summary
    landed = {k: n - summary["faults_without_target"].get(k, 0) for k, n in summary["faults_injected"].items()}
    assert sum(landed.get(k, 0) for k in ("link_cut", "link_split", "link_lossy")) >= 2, summary
    assert summary["writers"].get("failed", 0) >= 1, summary  # a cut stopped some save's replica
    # Real DCP jobs (two gloo ranks, one step spanning n1's and n2's agents) were acknowledged and
    # loaded back through DCP by the oracle, beside the C++ writers.
    assert summary["writers"].get("dcp_acked", 0) >= 2, summary
    assert summary["netns_left"] == [], summary


@pytest.mark.long
def test_random_seed_campaign_breaks_no_invariant(tmp_path):
    """The same on a fresh seed (printed: replay it with --seed)."""
    needs_netns()
    seed = random.SystemRandom().randrange(1 << 31)
    print(f"tierckpt-stress random seed: {seed}")
    sys.stdout.flush()
    summary = run_campaign(tmp_path, seed, 12, 75, "--dcp", "--network", "netns", min_rounds=6, min_acked=12)
    assert summary["netns_left"] == [], summary


def test_the_oracle_can_fail(tmp_path):
    """The oracle is not blind: a restore that succeeds with another writer's bytes is wrong_bytes."""
    sys.path.insert(0, str(STRESS.parent))
    from oracle import Oracle, Attempt, Violation  # noqa: PLC0415

    class OneNode:
        durable = tmp_path / "durable"
        keep_last = 3
        nodes = staticmethod(lambda: ["n1"])
        holder = staticmethod(lambda n: "n1")

        class A:
            def cli(self, *args, **kw):
                out = Path(args[args.index("--to") + 1])
                out.mkdir(parents=True)
                from content import object_bytes  # noqa: PLC0415
                (out / "obj_0.bin").write_bytes(object_bytes(999, 1, 0, 4096))  # another writer's bytes
                return subprocess.CompletedProcess(args, 0, "{}", "")
        agents = {"n1": A()}

    o = Oracle(OneNode(), tmp_path / "scratch")
    a = Attempt("n1-a", 1, "n1", 7, 1, 4096)
    o.attempt(a)
    o.ack(a)
    with pytest.raises(Violation) as e:
        o.check_step(("n1-a", 1))
    assert e.value.invariant == "wrong_bytes"


def test_a_replay_repeats_the_recorded_schedule(tmp_path):
    """--replay of a summary runs the same seed, rounds, kinds, nodes and budget: the same faults aimed
    at the same nodes, round for round (the schedule is a function of (seed, round) only)."""
    env = dict(os.environ, TIERCKPT_BIN_DIR=str(BIN_DIR))

    def run(*args, out):
        r = subprocess.run([sys.executable, str(STRESS), *args, "--json", str(out), "--workdir", str(tmp_path)],
                           capture_output=True, text=True, timeout=240, env=env)
        assert r.returncode == 0, f"tierckpt-stress {' '.join(args)} failed:\n{r.stdout[-8000:]}\n{r.stderr[-3000:]}"
        return json.loads(out.read_text())

    first = run("--seed", "31", "--faults", "6", "--nodes", "3", "--budget", "48MiB", out=tmp_path / "first.json")
    again = run("--replay", str(tmp_path / "first.json"), out=tmp_path / "again.json")
    assert len(first["schedule"]) == first["rounds"] == 6, first
    assert again["schedule"] == first["schedule"], (first["schedule"], again["schedule"])
    assert (again["seed"], again["kinds"], again["nodes"], again["budget"]) == \
        (first["seed"], first["kinds"], first["nodes"], first["budget"])
    assert again["status"] == "ok" and not again["violations"], again
    # --landed N stops starting rounds once N faults found a target (the figure issue 42 counts).
    assert first["faults_landed"] == \
        sum(first["faults_injected"].values()) - sum(first["faults_without_target"].values()), first
    assert first["faults_landed"] >= 2, first
    sized = run("--seed", "31", "--faults", "6", "--landed", "2", "--nodes", "3", "--budget", "48MiB",
                out=tmp_path / "sized.json")
    assert sized["faults_landed"] == 2 and sized["rounds"] <= first["rounds"], sized
    assert sized["schedule"] == first["schedule"][:sized["rounds"]], (sized["schedule"], first["schedule"])


def test_the_dcp_checker_answers_as_a_check_process_would(tmp_path):
    """The oracle's long-lived DCP checker (dcp_job.py serve, one forked process per check) gives the
    exit status and reason a `dcp_job.py check` process gives: 0 for the saved values, 3 for a step
    loaded with other values, 2 for one that does not load; and a checker that died is restarted."""
    pytest.importorskip("torch.distributed.checkpoint")
    sys.path.insert(0, str(STRESS.parent))
    import torch.distributed.checkpoint as dcp  # noqa: PLC0415

    import dcp_job  # noqa: PLC0415
    from oracle import Attempt, DcpChecker, run_dcp_check  # noqa: PLC0415

    saved = tmp_path / "step"
    dcp.save(dcp_job.expected_state(5, 3, 0), storage_writer=dcp.FileSystemWriter(str(saved)), no_dist=True)
    checker = DcpChecker(tmp_path / "checker.log")
    try:
        for seed, where, rc in ((5, saved, 0), (6, saved, 3), (5, tmp_path / "absent", 2)):
            a = Attempt("n1-dcp", 3, "n1", seed, 0, 0, dcp_world=1)
            got = checker.check(a, "--durable-dir", where)
            assert got.returncode == rc, (seed, where, got)
            if rc == 3:  # the same verdict and reason as a process of its own
                alone = run_dcp_check(a, "--durable-dir", where)
                assert (alone.returncode, alone.stderr.strip()) == (3, got.stderr.strip()), (alone, got)
                assert "loaded with other values than seed 6" in got.stderr, got
        checker.proc.kill()
        checker.proc.wait()
        got = checker.check(Attempt("n1-dcp", 3, "n1", 5, 0, 0, dcp_world=1), "--durable-dir", saved)
        assert got.returncode == 0 and checker.restarts == 1, (got, checker.restarts)
    finally:
        checker.close()


def test_agents_in_network_namespaces_reach_the_campaigns_s3(tmp_path):
    """`--network netns --durable s3`: the fault proxy in front of moto listens on this machine's address on
    the hosts' switch, so an agent's namespace reaches it (it listened on 127.0.0.1 only, which a namespace's own
    loopback does not reach: a 4-round try acknowledged 0 of 13 steps). A request from host 1's namespace gets
    moto's answer through the proxy."""
    needs_netns()
    sys.path.insert(0, str(STRESS.parent))
    from netns import Hosts  # noqa: PLC0415
    from s3_tier import S3Tier  # noqa: PLC0415

    hosts = Hosts(1)
    try:
        s3 = S3Tier(tmp_path, listen_host=hosts.own_ip)
        try:
            assert f"endpoint=http://{hosts.own_ip}:" in s3.url, s3.url
            probe = ("import sys, urllib.request, urllib.error\n"
                     "try:\n    urllib.request.urlopen(sys.argv[1], timeout=10)\n"
                     "except urllib.error.HTTPError:\n    pass\nprint('answered')\n")
            url = f"{s3.proxy.endpoint}/{s3.bucket}"
            r = subprocess.run([*hosts.prefix(1), sys.executable, "-c", probe, url],
                               capture_output=True, text=True, timeout=60)
            assert r.returncode == 0 and "answered" in r.stdout, r.stderr[-2000:]
            assert s3.proxy.requests(method="GET"), "the request did not pass through the fault proxy"
        finally:
            s3.stop()
    finally:
        hosts.close()
