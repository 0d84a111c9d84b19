"""A stub S3 Express One Zone directory bucket that checks every request.

No local server implements S3 Express (CreateSession, session-token signing,
zonal virtual hosts), so this one plays a single directory bucket:

    stub = ExpressStub("tc-bench--usw2-az1--x-s3", base=BaseKeys("AKID", "SECRET", "TOKEN")).start()
    stub.endpoint        # "http://s3express-usw2-az1.us-west-2.tc-stub.test:PORT": the URL's endpoint=
    stub.virtual_host    # "tc-bench--usw2-az1--x-s3.s3express-usw2-az1.us-west-2.tc-stub.test"
    stub.hostnames       # the names a private /etc/hosts must map to 127.0.0.1
    ...                  # run the client
    stub.violations      # [] when every request passed every check
    stub.requests        # every request (Recorded), in arrival order
    stub.stop()

It listens on 127.0.0.1 (threaded, HTTP/1.1 keep-alive) and serves CreateSession
(`GET /?session`), PutObject, Create/UploadPart/Complete/AbortMultipartUpload,
GetObject (Range), HeadObject, DeleteObject(s), ListMultipartUploads and
ListObjectsV2 (at most `page_size` entries a page, in a hash order that is NOT
lexicographic, as directory buckets list).

Every request is checked; a failure answers 403 with an S3 <Error> whose Code
names the check, and is appended to `violations`:
  Host            "<bucket>.s3express-<zone>.<region>.<domain>:PORT", the zonal virtual host
  Authorization   AWS4-HMAC-SHA256, scope <date>/<region>/s3express/aws4_request; host,
                  x-amz-date, x-amz-content-sha256 and every x-amz-* header signed
  Signature       recomputed with botocore (SigV4Auth's canonical request, S3's unnormalised
                  path, the query decoded and re-encoded, the request's x-amz-date as the time)
                  with the BASE secret for CreateSession, the session's secret otherwise
  RequestTime     x-amz-date within 15 minutes
  Credentials     CreateSession: the base key, x-amz-security-token = the base token (absent
                  if none), no session token. Data requests: x-amz-s3session-token of an
                  unexpired session issued here, signed by its key; NO x-amz-security-token
  PathEncoding    the path is the key URI-encoded once ('/' kept)
  ContentSHA256   UNSIGNED-PAYLOAD or the body's SHA-256
  ChecksumCRC32C  x-amz-checksum-crc32c = the body's CRC32C; on CompleteMultipartUpload, the
                  whole object's, and each listed part's ChecksumCRC32C
  ContentMD5      Content-MD5 = the body's MD5; DeleteObjects needs it or a checksum
  Express rules   listing prefixes end in '/', '/' is the only delimiter; completed parts are
                  1..n consecutive with matching ETags, all but the last >= 5 MiB
404 NoSuchKey/NoSuchUpload, 412 (If-None-Match: * on an existing key) and a
CreateSession refused on purpose are ordinary answers, not violations.

Knobs, changeable while running: `session_lifetime_s` (Expiration of new
sessions; AWS's last 300 s), `page_size`, `create_session_error` (None or
(status, code, message)).
"""
from __future__ import annotations

import base64
import calendar
import hashlib
import http.server
import re
import secrets
import threading
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from urllib.parse import quote, unquote
from xml.sax.saxutils import escape

from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials as BotoCredentials

MIN_PART_SIZE = 5 << 20
_AUTH_RE = re.compile(r"AWS4-HMAC-SHA256 Credential=([^,]+), ?SignedHeaders=([^,]+), ?Signature=([0-9a-f]{64})$")
_RANGE_RE = re.compile(r"bytes=(\d+)-(\d*)$")
_NS = "http://s3.amazonaws.com/doc/2006-03-01/"
_XML_DECL = '<?xml version="1.0" encoding="UTF-8"?>\n'

from crc32c_ref import _crc32c_py, crc32c, crc32c_b64  # noqa: F401,E402  (re-exported)


# ---- records ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class BaseKeys:
    """The base (IAM) credentials the client must sign CreateSession with."""
    access_key: str
    secret_key: str
    session_token: str | None = None

    def env(self) -> dict:
        e = {"AWS_ACCESS_KEY_ID": self.access_key, "AWS_SECRET_ACCESS_KEY": self.secret_key}
        if self.session_token:
            e["AWS_SESSION_TOKEN"] = self.session_token
        return e


@dataclass
class Session:
    access_key: str
    secret_key: str
    token: str
    expires: float  # epoch seconds
    mode: str       # ReadWrite or ReadOnly


@dataclass
class Recorded:
    seq: int
    time: float
    op: str
    method: str
    path: str                    # raw, as on the wire
    key: str | None              # decoded object key; None for bucket requests
    query: dict[str, str]        # decoded
    headers: dict[str, str]      # lower-case names
    body_size: int
    connection: int              # client port: requests on one keep-alive connection share it
    status: int = 0
    error: str = ""              # the S3 error code answered, if any
    session_token: str | None = None


@dataclass
class _Upload:
    key: str
    upload_id: str
    parts: dict[int, tuple[bytes, str, str]] = field(default_factory=dict)  # n → (data, etag, crc b64)


class _Reply(Exception):
    """An S3 answer other than success; `check` set when it is a protocol violation."""

    def __init__(self, status: int, code: str, message: str, check: bool = False):
        super().__init__(message)
        self.status, self.code, self.message, self.check = status, code, message, check


def _precondition() -> _Reply:
    return _Reply(412, "PreconditionFailed", "At least one of the pre-conditions you specified did not hold")


def _violation(check: str, message: str) -> _Reply:
    return _Reply(403, check, f"express_stub check {check} failed: {message}", check=True)


def _xml(root: str, inner: str) -> bytes:
    return (_XML_DECL + f'<{root} xmlns="{_NS}">{inner}</{root}>').encode()


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


# ---- the stub -----------------------------------------------------------------------------------

class ExpressStub:
    def __init__(self, bucket: str, *, base: BaseKeys, region: str = "us-west-2", domain: str = "tc-stub.test",
                 session_lifetime_s: float = 300.0, page_size: int = 3):
        zone = bucket.rsplit("--", 2)[1] if bucket.endswith("--x-s3") else ""
        if not zone:
            raise ValueError(f"{bucket!r} is not a directory bucket name (<base>--<zone>--x-s3)")
        self.bucket, self.base, self.region = bucket, base, region
        self.zonal_host = f"s3express-{zone}.{region}.{domain}"
        self.virtual_host = f"{bucket}.{self.zonal_host}"
        self.session_lifetime_s = session_lifetime_s
        self.page_size = page_size
        self.create_session_error: tuple[int, str, str] | None = None
        self.objects: dict[str, bytes] = {}
        self.uploads: dict[str, _Upload] = {}
        self.sessions: dict[str, Session] = {}
        self.requests: list[Recorded] = []
        self.violations: list[str] = []
        self.unordered_pages = 0  # listing pages whose keys were not in lexicographic order
        self._lock = threading.Lock()
        self._server: http.server.ThreadingHTTPServer | None = None
        self.port = 0

    # -- lifecycle --
    def start(self) -> ExpressStub:
        stub = self

        class Handler(_Handler):
            owner = stub

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, name="express-stub", daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    @property
    def endpoint(self) -> str:
        return f"http://{self.zonal_host}:{self.port}"

    @property
    def hostnames(self) -> list[str]:
        return [self.zonal_host, self.virtual_host]

    # -- queries for tests --
    def ops(self, name: str) -> list[Recorded]:
        with self._lock:
            return [r for r in self.requests if r.op == name]

    def data_requests(self) -> list[Recorded]:
        with self._lock:
            return [r for r in self.requests if r.op != "CreateSession"]

    # -- request handling --
    def handle(self, method: str, raw_path: str, headers: dict[str, str], body: bytes, port: int):
        """Returns (status, headers, body) and records the request."""
        path, _, raw_query = raw_path.partition("?")
        query: dict[str, str] = {}
        dup = None
        for pair in filter(None, raw_query.split("&")):
            k, _, v = pair.partition("=")
            k, v = unquote(k), unquote(v)
            if k in query:
                dup = k
            query[k] = v
        key = unquote(path[1:]) if path not in ("", "/") else None
        op = _classify(method, key, query)
        with self._lock:
            rec = Recorded(len(self.requests), time.time(), op, method, raw_path, key, query, dict(headers),
                           len(body), port, session_token=headers.get("x-amz-s3session-token"))
            self.requests.append(rec)
        try:
            if dup:
                raise _violation("Query", f"parameter {dup!r} appears twice")
            session = self._authenticate(rec, path, body)
            status, out_headers, out_body = self._dispatch(rec, session, body)
        except _Reply as r:
            rec.error = r.code
            if r.check:
                with self._lock:
                    self.violations.append(f"#{rec.seq} {op} {method} {raw_path}: {r.message}")
            status, out_headers = r.status, {"Content-Type": "application/xml"}
            out_body = _xml("Error", f"<Code>{escape(r.code)}</Code><Message>{escape(r.message)}</Message>"
                                     f"<RequestId>stub{rec.seq}</RequestId>").replace(f' xmlns="{_NS}"'.encode(), b"")
        rec.status = status
        out_headers.setdefault("x-amz-request-id", f"stub{rec.seq}")
        return status, out_headers, out_body

    def _authenticate(self, rec: Recorded, path: str, body: bytes) -> Session | None:
        h = rec.headers
        want_host = f"{self.virtual_host}:{self.port}"
        if h.get("host") != want_host:
            raise _violation("Host", f"Host {h.get('host')!r}, expected the bucket's zonal virtual host {want_host!r}")
        want_path = "/" if rec.key is None else "/" + quote(rec.key, safe="/~")
        if path != want_path:
            raise _violation("PathEncoding", f"path {path!r} is not the key encoded once ({want_path!r})")
        if "transfer-encoding" in h:
            raise _violation("ContentLength", f"Transfer-Encoding {h['transfer-encoding']!r} without "
                                              "Content-Length (S3 answers 411 MissingContentLength)")
        m = _AUTH_RE.match(h.get("authorization", ""))
        if not m:
            raise _violation("Authorization", f"not an AWS4-HMAC-SHA256 header: {h.get('authorization')!r}")
        credential, signed_headers, signature = m.group(1), m.group(2).split(";"), m.group(3)
        amz_date = h.get("x-amz-date", "")
        try:
            t = calendar.timegm(time.strptime(amz_date, "%Y%m%dT%H%M%SZ"))
        except ValueError:
            raise _violation("RequestTime", f"x-amz-date {amz_date!r} is not YYYYMMDDTHHMMSSZ") from None
        if abs(t - time.time()) > 900:
            raise _violation("RequestTime", f"x-amz-date {amz_date} is more than 15 minutes off")
        akid, _, scope = credential.partition("/")
        want_scope = f"{amz_date[:8]}/{self.region}/s3express/aws4_request"
        if scope != want_scope:
            raise _violation("CredentialScope", f"scope {scope!r}, expected {want_scope!r}")
        if signed_headers != sorted(set(signed_headers)):
            raise _violation("SignedHeaders", f"SignedHeaders {';'.join(signed_headers)} not sorted and distinct")
        must_sign = {"host", "x-amz-date", "x-amz-content-sha256"} | {n for n in h if n.startswith("x-amz-")}
        missing = sorted(must_sign - set(signed_headers))
        absent = sorted(set(signed_headers) - set(h))
        if missing or absent:
            raise _violation("SignedHeaders", f"unsigned {missing}, signed but absent {absent}")

        with self._lock:
            session = self.sessions.get(h.get("x-amz-s3session-token", ""))
        problem = self._credentials_problem(rec, akid, session)
        if problem:
            raise _violation("Credentials", f"{rec.op}: {problem}")
        secret = self.base.secret_key if rec.op == "CreateSession" else session.secret_key

        sha = h.get("x-amz-content-sha256", "")
        if sha != "UNSIGNED-PAYLOAD" and sha != hashlib.sha256(body).hexdigest():
            raise _violation("ContentSHA256", f"x-amz-content-sha256 {sha!r} is neither UNSIGNED-PAYLOAD "
                                              "nor the body's SHA-256")
        request = AWSRequest(method=rec.method, url=f"http://{want_host}{want_path}",
                             headers={n: h[n] for n in signed_headers}, data=body,
                             params=list(rec.query.items()))
        request.context["timestamp"] = amz_date
        auth = S3SigV4Auth(BotoCredentials(akid, secret), "s3express", self.region)
        canonical = auth.canonical_request(request)
        expected = auth.signature(auth.string_to_sign(request, canonical), request)
        if signature != expected:
            raise _violation("Signature", f"signature {signature} != botocore's {expected} "
                                          f"for canonical request {canonical!r}")
        if "content-md5" in h:
            md5 = base64.b64encode(hashlib.md5(body).digest()).decode()
            if h["content-md5"] != md5:
                raise _violation("ContentMD5", f"Content-MD5 {h['content-md5']} != the body's {md5}")
        if rec.op != "CompleteMultipartUpload" and "x-amz-checksum-crc32c" in h:
            got = crc32c_b64(body)
            if h["x-amz-checksum-crc32c"] != got:
                raise _violation("ChecksumCRC32C", f"x-amz-checksum-crc32c {h['x-amz-checksum-crc32c']} "
                                                   f"!= the body's {got}")
        return session

    def _credentials_problem(self, rec: Recorded, akid: str, session: Session | None) -> str | None:
        h = rec.headers
        if rec.op == "CreateSession":
            if akid != self.base.access_key:
                return f"signed by {akid!r}, not the base key"
            if h.get("x-amz-security-token") != self.base.session_token:
                return f"x-amz-security-token {h.get('x-amz-security-token')!r} is not the base credentials' token"
            return "it carries x-amz-s3session-token" if "x-amz-s3session-token" in h else None
        if "x-amz-security-token" in h:
            return "a data request carries x-amz-security-token (S3 Express takes only x-amz-s3session-token)"
        if session is None:
            return f"x-amz-s3session-token {h.get('x-amz-s3session-token')!r} is not a session this stub issued"
        if time.time() >= session.expires:
            return f"the session expired {time.time() - session.expires:.1f}s ago"
        return f"signed by {akid!r}, not the session's {session.access_key!r}" if akid != session.access_key else None

    def _dispatch(self, rec: Recorded, session: Session | None, body: bytes):
        if session is not None and session.mode == "ReadOnly" and rec.method in ("PUT", "POST", "DELETE"):
            raise _violation("SessionMode", f"{rec.op} with a ReadOnly session")
        handler = getattr(self, "_op_" + rec.op, None)
        if handler is None:
            raise _violation("Operation", f"{rec.method} {rec.path} is not an operation tierckpt should send")
        return handler(rec, body)

    # -- operations --
    def _op_CreateSession(self, rec: Recorded, body: bytes):
        if self.create_session_error:
            status, code, message = self.create_session_error
            raise _Reply(status, code, message)
        mode = rec.headers.get("x-amz-create-session-mode", "ReadWrite")
        if mode not in ("ReadWrite", "ReadOnly"):
            raise _violation("SessionMode", f"x-amz-create-session-mode {mode!r}")
        s = Session("ASIA" + secrets.token_hex(8).upper(), base64.b64encode(secrets.token_bytes(30)).decode(),
                    "S3X/" + base64.b64encode(secrets.token_bytes(96)).decode(),
                    float(int(time.time() + self.session_lifetime_s)), mode)
        with self._lock:
            self.sessions[s.token] = s
        expiration = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(s.expires))
        return 200, {"Content-Type": "application/xml"}, _xml(
            "CreateSessionResult",
            f"<Credentials><SessionToken>{escape(s.token)}</SessionToken>"
            f"<SecretAccessKey>{escape(s.secret_key)}</SecretAccessKey>"
            f"<AccessKeyId>{s.access_key}</AccessKeyId><Expiration>{expiration}</Expiration></Credentials>")

    def _op_PutObject(self, rec: Recorded, body: bytes):
        with self._lock:
            if rec.headers.get("if-none-match") == "*" and rec.key in self.objects:
                raise _precondition()
            self.objects[rec.key] = body
        return 200, {"ETag": _etag(body), "x-amz-checksum-crc32c": rec.headers.get("x-amz-checksum-crc32c", "")}, b""

    def _op_CreateMultipartUpload(self, rec: Recorded, body: bytes):
        if rec.headers.get("x-amz-checksum-algorithm", "CRC32C") != "CRC32C":
            raise _violation("ChecksumCRC32C", f"x-amz-checksum-algorithm {rec.headers['x-amz-checksum-algorithm']}")
        upload = _Upload(rec.key, secrets.token_urlsafe(24))
        with self._lock:
            self.uploads[upload.upload_id] = upload
        return 200, {"Content-Type": "application/xml"}, _xml(
            "InitiateMultipartUploadResult", f"<Bucket>{self.bucket}</Bucket><Key>{escape(rec.key)}</Key>"
                                             f"<UploadId>{upload.upload_id}</UploadId>")

    def _upload(self, rec: Recorded) -> _Upload:
        upload = self.uploads.get(rec.query.get("uploadId", ""))  # a dict lookup: atomic
        if upload is None or upload.key != rec.key:
            raise _Reply(404, "NoSuchUpload", "The specified multipart upload does not exist")
        return upload

    def _op_UploadPart(self, rec: Recorded, body: bytes):
        upload = self._upload(rec)
        n = rec.query.get("partNumber", "")
        if not n.isdigit() or not 1 <= int(n) <= 10000:
            raise _violation("PartNumber", f"partNumber {n!r} is not 1..10000")
        crc = crc32c_b64(body)
        with self._lock:
            upload.parts[int(n)] = (body, _etag(body), crc)
        return 200, {"ETag": _etag(body), "x-amz-checksum-crc32c": crc}, b""

    def _op_CompleteMultipartUpload(self, rec: Recorded, body: bytes):
        upload = self._upload(rec)
        try:
            listed = [{_local(c.tag): (c.text or "") for c in p} for p in ET.fromstring(body)
                      if _local(p.tag) == "Part"]
        except ET.ParseError as e:
            raise _violation("CompleteBody", f"not XML: {e}") from None
        numbers = [int(p.get("PartNumber", "0")) for p in listed]
        if numbers != list(range(1, len(numbers) + 1)) or not numbers:
            raise _violation("PartNumber", f"part numbers {numbers} are not 1..n consecutive and ascending "
                                           "(directory buckets require it)")
        with self._lock:
            parts = dict(upload.parts)
        for i, p in enumerate(listed):
            n = numbers[i]
            if n not in parts or parts[n][1] != p.get("ETag"):
                raise _violation("CompleteParts", f"part {n} ETag {p.get('ETag')!r} does not match an uploaded part")
            if p.get("ChecksumCRC32C") != parts[n][2]:
                raise _violation("ChecksumCRC32C", f"part {n} ChecksumCRC32C {p.get('ChecksumCRC32C')!r} "
                                                   f"!= {parts[n][2]}")
            if n != len(listed) and len(parts[n][0]) < MIN_PART_SIZE:
                raise _violation("EntityTooSmall", f"part {n} is {len(parts[n][0])} bytes, under 5 MiB")
        data = b"".join(parts[n][0] for n in numbers)
        whole = crc32c_b64(data)
        if rec.headers.get("x-amz-checksum-crc32c", whole) != whole:
            raise _violation("ChecksumCRC32C", f"full-object x-amz-checksum-crc32c "
                                               f"{rec.headers['x-amz-checksum-crc32c']} != {whole}")
        etag = '"' + hashlib.md5(b"".join(hashlib.md5(parts[n][0]).digest() for n in numbers)).hexdigest() + \
            f'-{len(numbers)}"'
        with self._lock:
            if rec.headers.get("if-none-match") == "*" and rec.key in self.objects:
                raise _precondition()
            self.objects[rec.key] = data
            del self.uploads[upload.upload_id]
        return 200, {"Content-Type": "application/xml"}, _xml(
            "CompleteMultipartUploadResult", f"<Location>http://{self.virtual_host}/{escape(rec.key)}</Location>"
                                             f"<Bucket>{self.bucket}</Bucket><Key>{escape(rec.key)}</Key>"
                                             f"<ETag>{escape(etag)}</ETag><ChecksumCRC32C>{whole}</ChecksumCRC32C>")

    def _op_AbortMultipartUpload(self, rec: Recorded, body: bytes):
        with self._lock:
            self.uploads.pop(self._upload(rec).upload_id, None)
        return 204, {}, b""

    def _object(self, rec: Recorded) -> bytes:
        data = self.objects.get(rec.key)  # a dict lookup: atomic
        if data is None:
            raise _Reply(404, "NoSuchKey", "The specified key does not exist.")
        return data

    def _op_GetObject(self, rec: Recorded, body: bytes):
        data = self._object(rec)
        headers = {"ETag": _etag(data), "Content-Type": "application/octet-stream"}
        rng = rec.headers.get("range")
        if rng is None:
            return 200, headers, data
        m = _RANGE_RE.match(rng)
        if not m:
            raise _violation("Range", f"Range {rng!r} is not bytes=a-b")
        first = int(m.group(1))
        last = min(int(m.group(2)) if m.group(2) else len(data) - 1, len(data) - 1)
        if first >= len(data) or last < first:
            raise _Reply(416, "InvalidRange", "The requested range is not satisfiable")
        headers["Content-Range"] = f"bytes {first}-{last}/{len(data)}"
        return 206, headers, data[first:last + 1]

    def _op_HeadObject(self, rec: Recorded, body: bytes):
        data = self._object(rec)
        return 200, {"ETag": _etag(data), "Content-Length": str(len(data))}, b""

    def _op_DeleteObject(self, rec: Recorded, body: bytes):
        with self._lock:
            self.objects.pop(rec.key, None)
        return 204, {}, b""

    def _op_DeleteObjects(self, rec: Recorded, body: bytes):
        if "content-md5" not in rec.headers and not any(n.startswith("x-amz-checksum-") for n in rec.headers):
            raise _violation("ContentMD5", "DeleteObjects without Content-MD5 or an x-amz-checksum-* header")
        try:
            root = ET.fromstring(body)
        except ET.ParseError as e:
            raise _violation("DeleteBody", f"not XML: {e}") from None
        keys = [c.text or "" for o in root if _local(o.tag) == "Object" for c in o if _local(c.tag) == "Key"]
        quiet = any(_local(c.tag) == "Quiet" and (c.text or "").strip() == "true" for c in root)
        if not keys or len(keys) > 1000:
            raise _violation("DeleteBody", f"{len(keys)} keys (1..1000 allowed)")
        with self._lock:
            for k in keys:
                self.objects.pop(k, None)
        inner = "" if quiet else "".join(f"<Deleted><Key>{escape(k)}</Key></Deleted>" for k in keys)
        return 200, {"Content-Type": "application/xml"}, _xml("DeleteResult", inner)

    def _check_prefix(self, rec: Recorded) -> tuple[str, str]:
        prefix, delimiter = rec.query.get("prefix", ""), rec.query.get("delimiter", "")
        if prefix and not prefix.endswith("/"):
            raise _violation("Prefix", f"prefix {prefix!r} does not end in '/' (directory buckets list only those)")
        if delimiter not in ("", "/"):
            raise _violation("Delimiter", f"delimiter {delimiter!r}: '/' is the only one directory buckets support")
        return prefix, delimiter

    def _op_ListObjectsV2(self, rec: Recorded, body: bytes):
        prefix, delimiter = self._check_prefix(rec)
        encode = rec.query.get("encoding-type") == "url"
        enc = (lambda s: quote(s, safe="/")) if encode else (lambda s: s)  # noqa: E731
        max_keys = int(rec.query.get("max-keys", "1000"))
        entries: dict[str, int | None] = {}  # name → size (None for a common prefix)
        with self._lock:
            for k, v in self.objects.items():
                cut = k.find(delimiter, len(prefix)) if delimiter and k.startswith(prefix) else -1
                if k.startswith(prefix):
                    entries[k[:cut + 1] if cut >= 0 else k] = None if cut >= 0 else len(v)
        order = sorted(entries, key=_hash_order)
        token = rec.query.get("continuation-token")
        if token is not None:
            after = base64.urlsafe_b64decode(token.encode()).decode()
            order = [e for e in order if _hash_order(e) > _hash_order(after)]
        page = order[:max(1, min(max_keys, self.page_size))]
        truncated = len(order) > len(page)
        if page != sorted(page):
            with self._lock:
                self.unordered_pages += 1
        inner = [f"<Name>{self.bucket}</Name><Prefix>{escape(enc(prefix))}</Prefix><KeyCount>{len(page)}</KeyCount>"
                 f"<MaxKeys>{max_keys}</MaxKeys><IsTruncated>{str(truncated).lower()}</IsTruncated>",
                 f"<Delimiter>{escape(enc(delimiter))}</Delimiter>" if delimiter else "",
                 "<EncodingType>url</EncodingType>" if encode else "",
                 f"<ContinuationToken>{escape(token)}</ContinuationToken>" if token is not None else "",
                 f"<NextContinuationToken>{base64.urlsafe_b64encode(page[-1].encode()).decode()}"
                 "</NextContinuationToken>" if truncated else ""]
        for e in page:
            if entries[e] is None:
                inner.append(f"<CommonPrefixes><Prefix>{escape(enc(e))}</Prefix></CommonPrefixes>")
            else:
                inner.append(f"<Contents><Key>{escape(enc(e))}</Key><Size>{entries[e]}</Size>"
                             f"<ETag>&quot;stub&quot;</ETag><StorageClass>EXPRESS_ONEZONE</StorageClass></Contents>")
        return 200, {"Content-Type": "application/xml"}, _xml("ListBucketResult", "".join(inner))

    def _op_ListMultipartUploads(self, rec: Recorded, body: bytes):
        prefix, _ = self._check_prefix(rec)
        encode = rec.query.get("encoding-type") == "url"
        with self._lock:
            ups = [u for u in self.uploads.values() if u.key.startswith(prefix)]
        inner = [f"<Bucket>{self.bucket}</Bucket><Prefix>{escape(prefix)}</Prefix><IsTruncated>false</IsTruncated>",
                 "<EncodingType>url</EncodingType>" if encode else ""]
        for u in ups:
            k = quote(u.key, safe="/") if encode else u.key
            inner.append(f"<Upload><Key>{escape(k)}</Key><UploadId>{u.upload_id}</UploadId></Upload>")
        return 200, {"Content-Type": "application/xml"}, _xml("ListMultipartUploadsResult", "".join(inner))


_BUCKET_OPS = {("GET", "session"): "CreateSession", ("GET", "list-type"): "ListObjectsV2",
               ("GET", "uploads"): "ListMultipartUploads", ("POST", "delete"): "DeleteObjects"}
_KEY_OPS = {("PUT", "partNumber"): "UploadPart", ("PUT", ""): "PutObject", ("POST", "uploads"): "CreateMultipartUpload",
            ("POST", "uploadId"): "CompleteMultipartUpload", ("DELETE", "uploadId"): "AbortMultipartUpload",
            ("DELETE", ""): "DeleteObject", ("GET", ""): "GetObject", ("HEAD", ""): "HeadObject"}


def _classify(method: str, key: str | None, q: dict[str, str]) -> str:
    for (m, param), op in (_BUCKET_OPS if key is None else _KEY_OPS).items():
        if method == m and (param in q if param else not q):
            return op
    return "Unknown"


def _etag(data: bytes) -> str:
    return '"' + hashlib.md5(data).hexdigest() + '"'


def _hash_order(name: str) -> bytes:
    return hashlib.sha256(name.encode()).digest() + name.encode()


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body are separate writes: no 40 ms delayed-ACK stalls
    owner: ExpressStub

    def log_message(self, *args):  # quiet
        pass

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":  # a violation; read it all the same
            out = bytearray()
            while size := int(self.rfile.readline().split(b";")[0], 16):
                out += self.rfile.read(size)
                self.rfile.readline()
            while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                pass
            return bytes(out)
        return self.rfile.read(int(self.headers.get("Content-Length", "0") or 0))

    def _serve(self):
        body = self._body()
        headers: dict[str, str] = {}
        for name, value in self.headers.items():
            n = name.lower()
            headers[n] = f"{headers[n]},{value}" if n in headers else value
        status, out_headers, out_body = self.owner.handle(self.command, self.path, headers, body,
                                                          self.client_address[1])
        out_headers.setdefault("Content-Length", str(len(out_body)))  # HEAD: the object's length
        self.send_response(status)
        for n, v in out_headers.items():
            if v:
                self.send_header(n, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(out_body)

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _serve
