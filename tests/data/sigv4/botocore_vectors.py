"""Regenerates the botocore cross-check values pasted into src/s3/sigv4_test.cc
and src/s3/s3_express_test.cc.

Run: /work/main/.venv/bin/python tests/data/sigv4/botocore_vectors.py
(botocore 1.44.8 produced the values in the tests). Each case prints the
Authorization header botocore computes for a request with a frozen clock, so
our signer is checked against an independent implementation on S3-shaped
requests the generic AWS test suite does not cover.
"""
import datetime
from unittest import mock

import botocore.auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials

NOW = datetime.datetime(2024, 5, 1, 12, 0, 0)
KEY = Credentials("AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")
TEMP = Credentials("ASIAEXAMPLETEMP", "tempSecret/Key+EXAMPLE", "FwoGZXIvYXdzEXAMPLE//token==")
SESSION = Credentials("ASIASESSIONEXAMPLE", "sessionSecret/EXAMPLE+key", "s3expressSessionToken==EXAMPLE")


def sign(auth_class, creds, service, region, method, url, headers=None, body=b"",
         sign_payload=False, **kwargs):
    request = AWSRequest(method=method, url=url, data=body, headers=headers or {})
    request.context["client_config"] = Config(s3={"payload_signing_enabled": sign_payload})
    auth = auth_class(creds, service, region, **kwargs)
    with mock.patch.object(botocore.auth, "get_current_datetime", return_value=NOW):
        auth.add_auth(request)
    return request.headers["Authorization"], dict(request.headers)


def show(name, result):
    authz, headers = result
    print(f"== {name}\n{authz}")
    for k in ("X-Amz-Content-SHA256", "X-Amz-Security-Token", "x-amz-s3session-token"):
        if k in headers:
            print(f"  {k}: {headers[k]}")


S3 = botocore.auth.S3SigV4Auth
show("put_unsigned_payload", sign(
    S3, KEY, "s3", "us-west-2", "PUT",
    "https://examplebucket.s3.us-west-2.amazonaws.com/dir/a%20b%2Bc.bin",
    {"If-None-Match": "*", "x-amz-checksum-crc32c": "mnG7TA=="}, b"hello"))
show("list_objects_v2", sign(
    S3, KEY, "s3", "us-east-1", "GET",
    "https://examplebucket.s3.amazonaws.com/?list-type=2&prefix=a%2Fb&continuation-token=1%2BxYz%3D%3D"))
show("create_multipart_with_token", sign(
    S3, TEMP, "s3", "us-east-1", "POST",
    "https://examplebucket.s3.amazonaws.com/big/obj?uploads"))
show("upload_part", sign(
    S3, KEY, "s3", "us-east-1", "PUT",
    "https://examplebucket.s3.amazonaws.com/big/obj?partNumber=1&uploadId=abc.def-ghi_JKL~",
    {"Content-Length": "5"}, b"12345"))
show("path_style_port_signed_payload", sign(
    S3, KEY, "s3", "us-east-1", "PUT", "http://127.0.0.1:9000/bucket/k%C3%BC%2A.txt",
    {}, b"payload", sign_payload=True))
show("express_create_session", sign(
    S3, TEMP, "s3express", "us-west-2", "GET",
    "https://mybucket--usw2-az1--x-s3.s3express-usw2-az1.us-west-2.amazonaws.com/?session",
    {"x-amz-create-session-mode": "ReadWrite"}, sign_payload=True))
show("express_data_get", sign(
    botocore.auth.S3ExpressAuth, SESSION, "s3express", "us-west-2", "GET",
    "https://mybucket--usw2-az1--x-s3.s3express-usw2-az1.us-west-2.amazonaws.com/ckpt/step%2042/shard.bin",
    identity_cache=None))
