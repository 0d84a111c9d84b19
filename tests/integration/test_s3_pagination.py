"""Listings paginate: moto serves pages of 3 keys (MOTO_S3_DEFAULT_MAX_KEYS=3,
and the proxy lowers any max-keys the client sends to 3), and still every
namespace, step and object is found, restored, deleted and retained."""
import uuid

import pytest

from conftest import assert_dirs_equal
from fault_proxy import Fault
from conftest_s3 import (MANIFEST, FaultProxy, list_keys, new_bucket, s3_agent, start_moto,  # noqa: F401
                         step_prefix, wipe_tmpfs_and_restart)

PAGE = 3


@pytest.fixture(scope="module")
def paged_moto(tmp_path_factory):
    server = start_moto(log_dir=tmp_path_factory.mktemp("moto"), max_keys=PAGE)
    yield server
    server.stop()


@pytest.fixture
def paged(paged_moto, agents):
    """(agent, moto, proxy, bucket, prefix) with every listing paginated."""
    bucket = new_bucket(paged_moto)
    prefix = f"pages/{uuid.uuid4().hex[:10]}"
    proxy = FaultProxy(paged_moto.endpoint, max_keys=PAGE).start()
    try:
        yield paged_moto, proxy, bucket, prefix
    finally:
        proxy.stop()


def agent_for(agents, paged, *extra):
    moto, proxy, bucket, prefix = paged
    return s3_agent(agents, moto.s3_url(bucket, prefix, endpoint=proxy.endpoint), moto.keys, *extra)


def list_requests(proxy):
    return [e for e in proxy.log if e.method == "GET" and e.query.get("list-type") == "2"]


def test_many_steps_and_namespaces_are_all_listed(agents, paged, tmp_path):
    moto, proxy, bucket, prefix = paged
    a = agent_for(agents, paged)
    want = {"pa": list(range(1, 10)), "pb": [1], "pc": [4], "pd": [2], "pe": [7, 8]}
    refs = {}
    for ns, steps in want.items():
        for step in steps:
            ref = tmp_path / f"ref-{ns}-{step}"
            a.writer("--ns", ns, "--step", step, "--objects", 2, "--size", 4096, "--ref-dir", ref,
                     "--seed", step, "--persist", "--wait-durable")
            refs[ns, step] = ref
    wipe_tmpfs_and_restart(a)
    proxy.reset_log()
    listed = {}
    for s in a.cli_json("ls")["steps"]:
        assert s["durable"] == "committed" and s["memory"] != "committed", s
        listed.setdefault(s["namespace"], []).append(s["step"])
    assert {ns: sorted(v) for ns, v in listed.items()} == want
    paged_requests = [e for e in list_requests(proxy) if "continuation-token" in e.query]
    assert paged_requests, "no listing followed a continuation token: pagination was not exercised"
    for ns, step in (("pa", 1), ("pa", 9), ("pe", 8)):
        out = tmp_path / f"out-{ns}-{step}"
        a.cli("restore", ns, step, "--to", out)
        assert_dirs_equal(refs[ns, step], out)


def test_steps_only_the_durable_tier_holds_are_listed_with_their_manifests_read_in_parallel(agents, paged):
    """`ls` reads the manifest of each step only S3 holds (its size and object count): with each such
    GET held 0.3 s by the proxy, the reads overlap (they ran one after another: a namespace of
    hundreds of durable steps took seconds to list, the S3 campaign's checks grew round by round)."""
    moto, proxy, bucket, prefix = paged
    a = agent_for(agents, paged)
    for step in range(1, 7):
        a.writer("--ns", "wide", "--step", step, "--objects", 1 + step % 3, "--size", 1024 * step,
                 "--seed", step, "--persist", "--wait-durable")
    wipe_tmpfs_and_restart(a)
    proxy.add(Fault("delay", method="GET", path=MANIFEST + "$", delay_s=0.3))
    proxy.reset_log()
    steps = {s["step"]: s for s in a.cli_json("ls", "wide")["steps"]}
    assert sorted(steps) == list(range(1, 7))
    for step, s in steps.items():
        assert s["durable"] == "committed" and s["memory"] != "committed", s
        assert (s["objects"], s["bytes"]) == (1 + step % 3, (1 + step % 3) * 1024 * step), s
    reads = [(e.started, e.started + e.seconds) for e in proxy.log
             if e.method == "GET" and e.path.endswith(MANIFEST) and e.status == 200]
    assert len(reads) >= 6, reads
    overlapping = max(sum(1 for b, e in reads if b <= t < e) for t, _ in reads)
    assert overlapping >= 2, f"the manifest reads ran one at a time: {reads}"


def test_a_second_ls_of_durable_steps_costs_the_listing_pages_and_no_manifest_request(agents, paged):
    """`ls` of steps only S3 holds: the first reads each manifest once (a GET), the second only lists
    (decision 133): committed is read off the listing's keys, not a HEAD per step, and a manifest
    whose ETag the listing shows unchanged is not fetched again. It cost a HEAD per durable step and
    a GET per durable-only step on every call, which slowed the S3 campaign's rounds from ~1 s to
    ~11 s. A manifest rewritten behind the agent (another ETag) is read again, and only it."""
    moto, proxy, bucket, prefix = paged
    a = agent_for(agents, paged)
    steps = 12
    for step in range(1, steps + 1):
        a.writer("--ns", "twice", "--step", step, "--objects", 1, "--size", 512 * step, "--seed", step,
                 "--persist", "--wait-durable")
    wipe_tmpfs_and_restart(a)

    def ls():
        proxy.reset_log()
        listed = {s["step"]: s for s in a.cli_json("ls", "twice")["steps"]}
        assert sorted(listed) == list(range(1, steps + 1)), listed
        for step, s in listed.items():
            assert s["durable"] == "committed" and (s["objects"], s["bytes"]) == (1, 512 * step), s
        manifests = [e for e in proxy.log if e.path.endswith(MANIFEST)]
        return (sum(e.method == "HEAD" for e in manifests), sum(e.method == "GET" for e in manifests),
                len(list_requests(proxy)), len(proxy.log))

    keys = 2 * steps  # each step: its object and its manifest
    pages = -(-keys // PAGE)
    heads, gets, lists, total = ls()
    assert (heads, gets) == (0, steps), (heads, gets)
    assert pages <= lists <= pages + 1, lists
    heads, gets, lists, total = ls()
    assert (heads, gets) == (0, 0), f"the second ls sent {heads} manifest HEADs and {gets} GETs"
    assert pages <= lists <= pages + 1 and total == lists, (lists, total)

    # Step 5's manifest rewritten (the same step committed again elsewhere): another ETag, read again.
    s3 = moto.boto3_client()
    key = step_prefix(prefix, "twice", 5) + MANIFEST
    body = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    s3.put_object(Bucket=bucket, Key=key, Body=body + b" ")
    heads, gets, lists, total = ls()
    assert (heads, gets) == (0, 1), (heads, gets)


def test_a_memory_step_whose_durable_copy_was_deleted_behind_the_agent_is_not_listed_durable(agents, paged):
    """A step in memory and on S3 whose keys another party deleted (Ray's eviction does, through
    fsspec): `ls` says its durable copy is gone, also when the namespace's listing is empty. With
    decision 133's first version an empty listing left the persister's "committed" (only a
    namespace with a committed step counted as listed); python/tests/test_ray.py found it."""
    moto, proxy, bucket, prefix = paged
    a = agent_for(agents, paged)
    for step in (1, 2):
        a.writer("--ns", "gone", "--step", step, "--objects", 1, "--size", 4096, "--seed", step, "--persist",
                 "--wait-durable")
    assert {s: a.steps("gone")[s]["durable"] for s in (1, 2)} == {1: "committed", 2: "committed"}
    s3 = moto.boto3_client()
    for key in list_keys(s3, bucket, step_prefix(prefix, "gone", 2)):  # step 1 stays
        s3.delete_object(Bucket=bucket, Key=key)
    listed = a.steps("gone")
    assert listed[1]["durable"] == "committed" and listed[2]["durable"] != "committed", listed
    assert listed[2]["memory"] == "committed", listed
    for key in list_keys(s3, bucket, step_prefix(prefix, "gone", 1)):  # now nothing under the namespace
        s3.delete_object(Bucket=bucket, Key=key)
    listed = a.steps("gone")
    assert all(listed[s]["durable"] != "committed" for s in (1, 2)), listed


def test_step_with_many_objects_restores_and_deletes(agents, paged, tmp_path):
    moto, proxy, bucket, prefix = paged
    a = agent_for(agents, paged)
    ref = tmp_path / "ref"
    a.writer("--ns", "many", "--step", 1, "--objects", 40, "--size", 2048, "--ref-dir", ref, "--persist",
             "--wait-durable")
    s3 = moto.boto3_client()
    sp = step_prefix(prefix, "many", 1)
    assert len(list_keys(s3, bucket, sp)) == 41
    wipe_tmpfs_and_restart(a)
    out = tmp_path / "out"
    a.cli("restore", "many", 1, "--to", out)
    assert_dirs_equal(ref, out)
    proxy.reset_log()
    a.cli("rm", "many", 1, "--durable")
    assert list_keys(s3, bucket, sp) == [], "objects of a deleted step are left on S3"
    assert 1 not in a.steps("many")


def test_durable_retention_across_pages(agents, paged, tmp_path):
    moto, proxy, bucket, prefix = paged
    a = agent_for(agents, paged, "--durable-keep", "2")
    for step in range(1, 6):
        a.writer("--ns", "keep", "--step", step, "--objects", 2, "--size", 1024, "--persist", "--wait-durable")
    s3 = moto.boto3_client()
    left = sorted({k[len(prefix) + 1:].split("/")[1] for k in list_keys(s3, bucket, prefix + "/keep/")})
    assert left == ["step_0000000004", "step_0000000005"], left
    for step in (4, 5):
        assert step_prefix(prefix, "keep", step) + MANIFEST in list_keys(s3, bucket, step_prefix(prefix, "keep", step))
