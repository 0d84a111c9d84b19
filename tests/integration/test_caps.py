"""Caps on the agent's background work (docs/agent.md, "Background work"):
--persist-rate, --replicate-rate and --background-priority on a real tierckptd."""
import os
import time

import pytest

MiB = 1 << 20


def durable_manifest(agent, ns, step):
    return agent.durable / ns / f"step_{step:010d}" / "_tierckpt_manifest.json"


def thread_ids(agent):
    return sorted(int(t) for t in os.listdir(f"/proc/{agent.proc.pid}/task"))


def test_a_step_persisted_under_persist_rate_still_becomes_durable_and_no_faster(agents):
    a = agents("--memory-budget", "256MiB", "--persist-rate", "4MiB")
    assert "persist_rate=" in a.log_text() and "4.0 MiB/s" in a.log_text(), a.log_text()[-2000:]
    t0 = time.monotonic()
    # 8 MiB at 4 MiB/s after a burst of 1 MiB: 1.75 s at least; asserted loosely (speed is for benchmarks).
    a.writer("--ns", "r", "--step", 1, "--objects", 2, "--size", 4 * MiB, "--persist", "--wait-durable")
    elapsed = time.monotonic() - t0
    assert durable_manifest(a, "r", 1).exists()
    assert a.steps("r")[1]["durable"] == "committed"
    assert elapsed >= 1.0, f"8 MiB persisted in {elapsed:.2f}s despite --persist-rate 4MiB"


def test_without_a_rate_the_same_step_is_not_held_back(agents):
    a = agents("--memory-budget", "256MiB")
    a.writer("--ns", "r", "--step", 1, "--objects", 2, "--size", 4 * MiB, "--persist", "--wait-durable")
    assert durable_manifest(a, "r", 1).exists()
    assert "persist_rate=unlimited" in a.log_text()


@pytest.mark.parametrize("args,expect", [
    (["--persist-rate", "fast"], "--persist-rate \"fast\" is not a rate"),
    (["--persist-rate", "100K"], "at least 1MiB/s"),
    (["--replicate-rate", "25%"], "--replicate-rate"),
    (["--background-priority", "lowest"], "--background-priority"),
])
def test_a_bad_cap_is_refused_with_a_clear_error(agents, args, expect):
    a = agents("--memory-budget", "256MiB", *args, start=False)
    a.start(wait=False)
    assert a.proc.wait(timeout=30) == 2
    text = a.log_text()
    assert expect in text, text
    assert "use " in text, text  # says what to do


def test_background_threads_run_at_low_priority_and_serving_threads_do_not(agents):
    base = os.getpriority(os.PRIO_PROCESS, 0)
    a = agents("--memory-budget", "256MiB")  # default: --background-priority low
    niceness = {tid: os.getpriority(os.PRIO_PROCESS, tid) for tid in thread_ids(a)}
    assert niceness[a.proc.pid] == base  # the main thread (it serves the socket) keeps its priority
    low = [t for t, n in niceness.items() if n == max(base, 10)]
    # The two persist threads (verify threads stay normal: a commit waits on them).
    assert len(low) >= 2, niceness
    a.writer("--ns", "p", "--step", 1, "--objects", 1, "--size", MiB, "--persist", "--wait-durable")


def test_background_priority_normal_leaves_every_thread_alone(agents):
    base = os.getpriority(os.PRIO_PROCESS, 0)
    a = agents("--memory-budget", "256MiB", "--background-priority", "normal")
    assert all(os.getpriority(os.PRIO_PROCESS, t) == base for t in thread_ids(a))


def test_background_priority_idle_uses_sched_idle(agents):
    a = agents("--memory-budget", "256MiB", "--background-priority", "idle")
    policies = {t: os.sched_getscheduler(t) for t in thread_ids(a)}
    assert policies[a.proc.pid] != os.SCHED_IDLE
    assert sum(p == os.SCHED_IDLE for p in policies.values()) >= 2, policies
    a.writer("--ns", "p", "--step", 1, "--objects", 1, "--size", MiB, "--persist", "--wait-durable")
    assert durable_manifest(a, "p", 1).exists()
