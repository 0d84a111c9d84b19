"""The S3 test harness itself (s3_server.py, fault_proxy.py), checked with boto3
and raw HTTP: each fault does what the S3 tests rely on, the proxy forwards
large bodies both ways and keeps connections alive, listings paginate, and a
signature-checking server refuses a bad signature."""
import http.client
import time

import pytest

from conftest_s3 import MiB, FaultProxy, bucket, list_keys, moto, proxy, start_moto  # noqa: F401
from fault_proxy import Fault
from s3_server import Credentials


def raw(proxy_or_server, method, path, body=b"", headers=None):
    """One request on a fresh connection: (status, body) or the exception raised."""
    port = proxy_or_server.port
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def test_selectors_pick_the_right_matches():
    assert [Fault("internal", first=2).picks(n) for n in (1, 2, 3)] == [True, True, False]
    assert [Fault("internal", nth={2, 4}).picks(n) for n in (1, 2, 3, 4)] == [False, True, False, True]
    assert [Fault("internal", after=1).picks(n) for n in (1, 2, 3)] == [False, True, True]
    assert Fault("internal", method="PUT", query="partNumber").filters_match("PUT", "/b/k", {"partNumber": "1"})
    assert not Fault("internal", method="PUT", query="partNumber").filters_match("PUT", "/b/k", {})
    assert not Fault("internal", path=r"\.json$").filters_match("GET", "/b/x.bin", {})
    with pytest.raises(ValueError):
        Fault("explode")


def test_slowdown_and_internal_answer_s3_errors_and_keep_the_connection(moto, proxy, bucket):
    proxy.add(Fault("slowdown", method="PUT", first=1), Fault("internal", method="PUT", first=1))
    conn = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=30)
    try:
        statuses = []
        for _ in range(3):
            conn.request("PUT", f"/{bucket}/k.bin", body=b"x" * 100000)
            resp = conn.getresponse()
            statuses.append((resp.status, resp.read()))
    finally:
        conn.close()
    assert statuses[0][0] == 503 and b"<Code>SlowDown</Code>" in statuses[0][1]
    assert statuses[1][0] == 500 and b"<Code>InternalError</Code>" in statuses[1][1]
    assert statuses[2][0] == 200
    assert moto.boto3_client().get_object(Bucket=bucket, Key="k.bin")["Body"].read() == b"x" * 100000
    assert [e.fault for e in proxy.log] == ["slowdown", "internal", None]


def test_error200_on_complete_is_not_forwarded(moto, proxy, bucket):
    s3 = moto.boto3_client()
    upload = s3.create_multipart_upload(Bucket=bucket, Key="mp.bin")["UploadId"]
    part = s3.upload_part(Bucket=bucket, Key="mp.bin", UploadId=upload, PartNumber=1, Body=b"p" * 1000)
    proxy.add(Fault("error200", method="POST", query="uploadId"))
    body = (f"<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>{part['ETag']}</ETag></Part>"
            "</CompleteMultipartUpload>").encode()
    status, text = raw(proxy, "POST", f"/{bucket}/mp.bin?uploadId={upload}", body)
    assert status == 200 and b"<Error><Code>InternalError</Code>" in text
    assert [u["UploadId"] for u in s3.list_multipart_uploads(Bucket=bucket).get("Uploads", [])] == [upload]


def test_delay_slows_the_answer(moto, proxy, bucket):
    proxy.add(Fault("delay", method="GET", delay_s=0.6, first=1))
    t0 = time.monotonic()
    raw(proxy, "GET", f"/{bucket}?list-type=2")
    assert time.monotonic() - t0 >= 0.6


def test_dropped_response_and_request(moto, proxy, bucket):
    s3 = moto.boto3_client()
    s3.put_object(Bucket=bucket, Key="d.bin", Body=b"d" * 200000)
    proxy.add(Fault("drop_response", method="GET", first=1))
    url = moto.boto3_client(endpoint=proxy.endpoint).generate_presigned_url(
        "get_object", Params={"Bucket": bucket, "Key": "d.bin"})
    with pytest.raises(http.client.IncompleteRead) as e:
        raw(proxy, "GET", url[len(proxy.endpoint):])
    assert len(e.value.partial) == 100000, e.value.partial[:300]
    proxy.add(Fault("drop_request", method="PUT", first=1))
    with pytest.raises((http.client.RemoteDisconnected, ConnectionError)):
        raw(proxy, "PUT", f"/{bucket}/never.bin", body=b"n" * 300000)
    assert "never.bin" not in [k.split("/")[-1] for k in list_keys(s3, bucket)]
    assert [e.fault for e in proxy.log] == ["drop_response", "drop_request"]


def test_reset_request_and_response_are_rsts(moto, proxy, bucket):
    s3 = moto.boto3_client()
    s3.put_object(Bucket=bucket, Key="r.bin", Body=b"r" * 200000)
    url = moto.boto3_client(endpoint=proxy.endpoint).generate_presigned_url(
        "get_object", Params={"Bucket": bucket, "Key": "r.bin"})
    proxy.add(Fault("reset_response", method="GET", first=1))
    with pytest.raises(ConnectionResetError):
        raw(proxy, "GET", url[len(proxy.endpoint):])
    proxy.add(Fault("reset_request", method="PUT", first=1))
    with pytest.raises(ConnectionResetError):
        raw(proxy, "PUT", f"/{bucket}/never.bin", body=b"n" * 3000000)
    assert "never.bin" not in [k.split("/")[-1] for k in list_keys(s3, bucket)]
    assert [e.fault for e in proxy.log] == ["reset_response", "reset_request"]


def test_large_bodies_stream_both_ways(moto, proxy, bucket):
    data = bytes(range(256)) * (40 * MiB // 256) + b"tail"
    s3 = moto.boto3_client(endpoint=proxy.endpoint, max_attempts=1)
    s3.put_object(Bucket=bucket, Key="big.bin", Body=data)
    assert s3.get_object(Bucket=bucket, Key="big.bin")["Body"].read() == data
    assert [(e.method, e.status, e.bytes_in, e.bytes_out) for e in proxy.log] == [
        ("PUT", 200, len(data), 0), ("GET", 200, 0, len(data))]


def test_proxy_max_keys_forces_pages(moto, bucket):
    s3 = moto.boto3_client()
    for i in range(7):
        s3.put_object(Bucket=bucket, Key=f"p/{i}", Body=b"")
    with FaultProxy(moto.endpoint, max_keys=2) as p:
        via = moto.boto3_client(endpoint=p.endpoint, max_attempts=1)
        page = via.list_objects_v2(Bucket=bucket, Prefix="p/", MaxKeys=1000)
        assert page["KeyCount"] == 2 and page["IsTruncated"]
        assert list_keys(via, bucket, "p/") == [f"p/{i}" for i in range(7)]
        assert len([e for e in p.log if e.query.get("list-type") == "2"]) == 5


def test_signing_server_refuses_bad_signatures(tmp_path):
    server = start_moto(log_dir=tmp_path, auth=True, buckets=("tierckpt-harness",))
    from botocore.exceptions import ClientError  # noqa: PLC0415  (start_moto checked boto3 is there)

    try:
        good = server.boto3_client(max_attempts=1)
        good.put_object(Bucket="tierckpt-harness", Key="a", Body=b"1")
        bad = server.boto3_client(keys=Credentials(server.keys.access_key, "wrong"), max_attempts=1)
        with pytest.raises(ClientError) as e:
            bad.get_object(Bucket="tierckpt-harness", Key="a")
        assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
        assert good.get_object(Bucket="tierckpt-harness", Key="a")["Body"].read() == b"1"
    finally:
        server.stop()
