"""The C++ ObjectStore conformance suite's real-server S3 instantiation, against
each S3 implementation the tests run (docs/s3.md, "Tested implementations"):
moto with signature checking on, and Ceph's radosgw (the session's one-node
cluster, the `rgw` fixture of conftest.py): tc_store_test with
TIERCKPT_TEST_S3_URL pointing at a fresh prefix, filtered to the instantiation
named "S3" (not "S3Fake", the in-process fake bucket that ctest already runs).
Once directly against each, and against moto once more through the fault
proxy with a 503 or a 500 on every 14th request (each retried: the client's
logic, whatever the server)."""
import re
import subprocess
import uuid

import pytest

from conftest import BIN_DIR
from conftest_s3 import FaultProxy, start_moto
from fault_proxy import Fault
from s3_server import isolated_aws_env

BUCKET = "tierckpt-conformance"
FILTER = "AllStores/ObjectStoreConformance.*/S3"
STORE_TEST = BIN_DIR.parent / "src" / "store" / "tc_store_test"


@pytest.fixture(scope="module")
def signed_moto(tmp_path_factory):
    server = start_moto(log_dir=tmp_path_factory.mktemp("moto"), auth=True, buckets=(BUCKET,))
    yield server
    server.stop()


@pytest.fixture(params=["moto", "ceph_rgw"])
def server(request):
    """The S3 server of this run: signing moto, or the session's Ceph RGW (its bucket made here;
    RGW answers 200 when its owner creates it again)."""
    if request.param == "moto":
        return request.getfixturevalue("signed_moto")
    rgw = request.getfixturevalue("rgw")
    rgw.create_bucket(BUCKET)
    return rgw


def run_s3_conformance(server, endpoint):
    if not STORE_TEST.is_file():
        pytest.fail(f"{STORE_TEST} is missing: build first with scripts/setup.sh release", pytrace=False)
    env = isolated_aws_env()
    env.update(server.keys.env())
    env["TIERCKPT_TEST_S3_URL"] = f"s3://{BUCKET}/conformance-{uuid.uuid4().hex[:10]}?endpoint={endpoint}"
    r = subprocess.run([str(STORE_TEST), f"--gtest_filter={FILTER}"], env=env, capture_output=True,
                       text=True, timeout=240, stdin=subprocess.DEVNULL)
    out = r.stdout + r.stderr
    passed = re.search(r"\[  PASSED  \] (\d+) tests?", out)
    skipped = re.search(r"\[  SKIPPED \] (\d+) tests?", out)
    ran = re.findall(r"^\[ RUN      \] (\S+)$", out, re.MULTILINE)
    assert r.returncode == 0, f"tc_store_test (S3) failed with {r.returncode}:\n{out[-8000:]}"
    assert passed and int(passed.group(1)) > 0, f"no S3 conformance test ran:\n{out[-4000:]}"
    assert ran and all(name.endswith("/S3") for name in ran), f"tests outside the real-S3 instantiation ran: {ran}"
    assert int(passed.group(1)) == len(ran)
    assert not skipped, f"S3 conformance tests were skipped although TIERCKPT_TEST_S3_URL was set:\n{out[-4000:]}"
    return int(passed.group(1))


def test_conformance_suite(server):
    run_s3_conformance(server, server.endpoint)


@pytest.mark.long
def test_conformance_suite_through_periodic_faults(signed_moto):
    with FaultProxy(signed_moto.endpoint) as proxy:
        slow = Fault("slowdown", nth=frozenset(range(3, 100000, 28)))
        internal = Fault("internal", nth=frozenset(range(17, 100000, 28)))
        proxy.add(slow, internal)
        run_s3_conformance(signed_moto, proxy.endpoint)
        assert slow.applied > 0 and internal.applied > 0, proxy.faults_applied()
