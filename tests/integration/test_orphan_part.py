"""Decision 152: a part of a step spanning nodes whose coordinator failed the step (an "orphan":
committed on its member, never on the coordinator) must not hold up the persistence of anything
else on its node.

Found by the netns+DCP fault campaign (docs/reliability.md, run L, `writer_stuck`): a DCP step
spanning n1's and n2's agents was committed on n2 down the commit tree, n2's replication of it
failed (its holder had just been SIGKILLed), so n1 failed the step and never committed its own part.
n2's persister uploaded n2's part and waited for n1's, holding a persist thread for `--parts-wait`
(an hour); two such steps held both threads, and every step written on n2 after them waited for
its durable copy behind them.

Here, with real agents: three agents with `--replicas 3 --replica-ack all --persist-threads 1`; n3
SIGKILLed; n1 commits a step across n1 and n2, which fails because n2 cannot replicate its part to
n3; n3 restarted; then a step of n2 alone, written with `--persist --wait-durable`, must become
durable at once while the orphan waits, which `agent status` reports (`persist_awaiting_parts`).
Before decision 152 the second writer waited out `--parts-wait` (600 s here).
"""
import time

from peer_cluster import PeerCluster, wait_for

NS = "span"
EXTRA = ("--replicas", "3", "--replica-ack", "all", "--persist-threads", "1", "--parts-wait", "600",
         "--takeover-after", "600", "--peer-timeout-ms", "2000")


def write(agent, step, *args, **kw):
    return agent.writer("--ns", NS, "--step", step, "--objects", 2, "--size", 65536, "--seed", step, *args, **kw)


def logs(c) -> str:
    return "\n".join(f"--- {n} ---\n{a.log_text()[-2500:]}" for n, a in c.nodes.items())


def test_an_orphan_part_of_a_failed_spanning_step_holds_up_no_other_persist(agents, tmp_path):
    c = PeerCluster(agents, tmp_path, 3, EXTRA, together=True)
    n1, n2, n3 = c["n1"], c["n2"], c["n3"]
    # A first step of n2 alone: the cluster replicates and persists.
    write(n2, 1, "--persist", "--wait-durable")

    # n3 gone: n2 can commit its part but not replicate it, so the coordinator n1 fails the step.
    n3.kill()  # SIGKILL, waited for
    part = n2.writer_held("--ns", NS, "--step", 2, "--objects", 2, "--size", 65536, "--prefix", "n2_", "--seed", 22)
    try:
        r = write(n1, 2, "--prefix", "n1_", "--members", "n1,n2", "--persist", check=False)
        assert r.returncode != 0, f"the spanning commit succeeded with n3 gone:\n{r.stdout}\n{logs(c)}"
    finally:
        part.stdin.close()
        part.wait(timeout=30)
    assert "event=commit ns=span step=2 " in n2.log_text(), f"n2 did not commit its part of step 2:\n{logs(c)}"
    assert "event=commit ns=span step=2 " not in n1.log_text(), "n1 committed its part of a failed step"

    # n2 uploads its part of the orphan, then waits for n1's, which never comes.
    wait_for((n2.durable / NS / "step_0000000002" / "_tierckpt_part.n2.json").exists, timeout=30,
             what="n2 to upload its part of step 2")

    # With n3 back, a step of n2 alone is replicated and becomes durable at once, beside the orphan.
    n3.start()
    t0 = time.monotonic()
    write(n2, 3, "--persist", "--wait-durable", timeout=60)
    took = time.monotonic() - t0
    assert took < 30, f"n2's step 3 took {took:.1f} s to become durable beside the orphan"
    assert (n2.durable / NS / "step_0000000003" / "_tierckpt_manifest.json").exists()
    # The orphan is parked, holding no persist thread, and `agent status` says so (between two of its
    # looks at the durable tier, each a store read or two, once a second).
    wait_for(lambda: (lambda st: st.get("persist_awaiting_parts") == 1 and st["persist_running"] == 0)(
        n2.cli_json("agent", "status")), timeout=10, what="n2 to report the orphan parked")
    # The orphan's step never becomes durable: its coordinator's part does not exist.
    assert not (n2.durable / NS / "step_0000000002" / "_tierckpt_manifest.json").exists()

    # Deleted by hand, the orphan leaves n2's memory at once instead of after --parts-wait.
    n2.cli("rm", NS, 2)
    assert n2.cli_json("agent", "status")["persist_awaiting_parts"] == 0
    assert "event=persist_wait_cancelled ns=span step=2 " in n2.log_text()
    assert n2.steps(NS).get(2, {}).get("memory", "") == "", n2.steps(NS)
