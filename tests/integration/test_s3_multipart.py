"""Large objects go multipart, small ones in one PUT; a step's requests are
sized to its bytes / concurrency, never below part_size (src/s3/upload_plan.h);
the manifest is written last; downloads use ranged GETs; everything
round-trips byte-identical and boto3 reads what we wrote. The requests are
read off the fault proxy's log (no faults here)."""
import math
import uuid

import pytest

from conftest import assert_dirs_equal
from conftest_s3 import (MANIFEST, MiB, assert_s3_step_equals, bucket, moto, proxy, s3_agent,  # noqa: F401
                         step_prefix, wipe_tmpfs_and_restart, write_tree)

PART = 5 * MiB
TREE = {"big_0.bin": 24 * MiB, "big_1.bin": 24 * MiB + 123, "small.bin": MiB}
# The step's share of each of the 8 connections (default concurrency): the
# planned part size, since it is above part_size and within max_part_size.
SHARE = max(PART, math.ceil(sum(TREE.values()) / 8))


def planned_parts(name: str) -> int:
    return math.ceil(TREE[name] / SHARE)


@pytest.mark.parametrize("checksum", ["composite", "full_object"])
def test_large_objects_go_multipart_and_round_trip(moto, proxy, bucket, agents, tmp_path, checksum):
    prefix = f"mp/{uuid.uuid4().hex[:10]}"
    a = s3_agent(agents, moto.s3_url(bucket, prefix, endpoint=proxy.endpoint, part_size=PART,
                                     multipart_checksum=checksum), moto.keys)
    src = write_tree(tmp_path / "src", TREE)
    a.cli("save", "mp", 1, "--from", src, "--wait-durable", "--timeout", "180")
    base = "/" + bucket + "/" + step_prefix(prefix, "mp", 1)
    log = proxy.log

    for name in ("big_0.bin", "big_1.bin"):
        key = base + name
        mine = [e for e in log if e.path == key]
        creates = [e for e in mine if e.method == "POST" and e.has("uploads")]
        parts = [e for e in mine if e.method == "PUT" and e.has("partNumber")]
        completes = [e for e in mine if e.method == "POST" and e.has("uploadId")]
        assert len(creates) == 1 and len(completes) == 1, [(e.method, e.query) for e in mine]
        n = planned_parts(name)
        assert n >= 2
        assert sorted(int(e.query["partNumber"]) for e in parts) == list(range(1, n + 1))
        assert sum(e.bytes_in for e in parts) == TREE[name]
        assert sorted(e.bytes_in for e in parts)[1:] == [SHARE] * (n - 1), "parts of the step's share"
        assert all(e.status == 200 for e in parts + creates + completes)
        assert all(any(h.startswith("x-amz-checksum-") for h in e.headers) for e in parts), \
            "every part carries its x-amz-checksum-* header"
        assert creates[0].headers.get("x-amz-checksum-type") == checksum.upper(), creates[0].headers
        # FULL_OBJECT completes with the whole object's CRC32C; COMPOSITE with the parts' only.
        assert ("x-amz-checksum-crc32c" in completes[0].headers) == (checksum == "full_object")
        assert not [e for e in mine if e.method == "PUT" and not e.has("partNumber")], "no single PUT of a big object"
    small = [e for e in log if e.path == base + "small.bin" and e.method in ("PUT", "POST")]
    assert [(e.method, e.query) for e in small] == [("PUT", {})], "a small object is one PUT"

    writes = [i for i, e in enumerate(log) if e.method in ("PUT", "POST") and e.path.startswith(base)]
    manifest_puts = [i for i in writes if log[i].path == base + MANIFEST and log[i].method == "PUT"]
    assert manifest_puts and manifest_puts[-1] == writes[-1], "the manifest is the last write of the step"

    s3 = moto.boto3_client()
    assert_s3_step_equals(s3, bucket, step_prefix(prefix, "mp", 1), src)
    for name in ("big_0.bin", "big_1.bin"):
        etag = s3.head_object(Bucket=bucket, Key=step_prefix(prefix, "mp", 1) + name)["ETag"]
        assert etag.endswith(f'-{planned_parts(name)}"'), etag

    wipe_tmpfs_and_restart(a)
    proxy.reset_log()
    out = tmp_path / "out"
    a.cli("restore", "mp", 1, "--to", out)
    assert_dirs_equal(src, out)
    for name in ("big_0.bin", "big_1.bin"):
        gets = [e for e in proxy.log if e.method == "GET" and e.path == base + name]
        assert len(gets) >= 2 and all(e.range for e in gets), \
            f"{name} is downloaded in ranged GETs: {[e.range for e in gets]}"
        assert sum(e.bytes_out for e in gets) == TREE[name]
