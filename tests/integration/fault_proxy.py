"""A fault-injecting HTTP reverse proxy to put in front of an S3 server (moto).

    proxy = FaultProxy("http://127.0.0.1:MOTO_PORT").start()
    proxy.endpoint                      # "http://127.0.0.1:PROXY_PORT": give this to the client
    proxy.add(Fault("slowdown", method="PUT", query="partNumber", first=3))
    ...
    proxy.log                           # every request seen, in arrival order
    proxy.stop()

Every request is forwarded unchanged (method, path, query, headers including
Host — so SigV4 signatures stay valid — and the body) on a fresh connection
to the upstream server, and the upstream response is streamed back; the
client side keeps its connection alive (HTTP/1.1). Bodies are streamed in
1 MiB pieces in both directions (Content-Length or chunked), so gigabyte
objects pass without being held in memory. `Expect: 100-continue` is
answered by the proxy.

Faults. `add(Fault(...))` appends a rule; for each request the rules are
tried in order and the first whose filters match AND whose occurrence
selector picks this match applies. Each rule counts the requests that reach
it (not taken by an earlier rule) and match its filters: its 1st, 2nd, ...
match. Filters (all optional):
  method  "PUT", "GET", ...                 exact
  path    a regex searched in the path       e.g. r"/obj_1\\.bin$"
  query   a query parameter that must be present, e.g. "uploadId", "partNumber",
          "uploads", "list-type", "delete" (a string), or a callable(dict) -> bool
Occurrence selectors (one; default: every match):
  first=k   the first k matches             nth={2, 5}  those matches
  after=k   every match after the first k   (faults that outlast retries)
Actions:
  "slowdown"  drain the request body, answer 503 with S3's SlowDown XML error
  "internal"  drain the request body, answer 500 with S3's InternalError XML
  "error200"  drain the request body (do NOT forward: the upstream request
              never happens), answer 200 with an S3 <Error> XML body (Code
              from code=, default InternalError), like a failed
              CompleteMultipartUpload; pad=True sends whitespace first, as S3
              does while it works
  "delay"     sleep delay_s seconds, then forward normally
  "drop_response"  forward, send the upstream status, headers and the first
              keep_bytes bytes of the body (default half), then close the
              connection: a connection dropped mid-body
  "drop_request"   read keep_bytes of the request body (default half), then
              close without answering; the upstream never sees the request
  "reset_request"  as drop_request, but the connection is reset (TCP RST,
              SO_LINGER 0): the client's send or read fails with ECONNRESET
  "reset_response" as drop_response, but reset (RST) after the kept bytes
Each applied fault is recorded in the request's log entry (`fault`).

Address: the proxy listens on 127.0.0.1 unless given listen_host (e.g. the
test machine's address on a netns.Hosts switch, so that agents in network
namespaces reach it); it still forwards to the upstream where that is.

Listings: FaultProxy(upstream, max_keys=N) lowers the max-keys parameter of
every ListObjectsV2 request (list-type=2) to N, or adds it (moto's
MOTO_S3_DEFAULT_MAX_KEYS only applies when a request gives none), so a
client's listings paginate whatever page size it asks for. This changes the signed query: use it only with moto's
signature checking off.

Thread safety: add/clear/log/requests may be called from any thread while the
proxy serves. The proxy serves each client connection on its own thread.
"""
from __future__ import annotations

import http.client
import re
import socket
import struct
import threading
import time
import urllib.parse
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable

CHUNK = 1 << 20
_HOP_BY_HOP = {"connection", "keep-alive", "proxy-connection", "proxy-authenticate", "proxy-authorization",
               "te", "trailer", "trailers", "transfer-encoding", "upgrade", "expect"}
ACTIONS = ("slowdown", "internal", "error200", "delay", "drop_response", "drop_request", "reset_request",
           "reset_response")


def s3_error_xml(code: str, message: str, resource: str = "") -> bytes:
    rid = uuid.uuid4().hex[:16].upper()
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code><Message>{message}</Message>'
            f"<Resource>{resource}</Resource><RequestId>{rid}</RequestId>"
            f"<HostId>tierckpt-fault-proxy</HostId></Error>").encode()


@dataclass
class Fault:
    action: str
    method: str | None = None
    path: str | None = None
    query: str | Callable[[dict], bool] | None = None
    first: int | None = None
    nth: frozenset | set | tuple | None = None
    after: int | None = None
    delay_s: float = 1.0
    keep_bytes: int | None = None
    code: str = "InternalError"
    pad: bool = False
    matched: int = field(default=0, init=False)   # requests its filters matched
    applied: int = field(default=0, init=False)   # times the action ran

    def __post_init__(self):
        if self.action not in ACTIONS:
            raise ValueError(f"unknown fault action {self.action!r}; use one of {ACTIONS}")
        if sum(x is not None for x in (self.first, self.nth, self.after)) > 1:
            raise ValueError("give at most one of first=, nth=, after=")
        self._path_re = re.compile(self.path) if self.path else None

    def filters_match(self, method: str, path: str, query: dict) -> bool:
        if self.method and method != self.method:
            return False
        if self._path_re and not self._path_re.search(path):
            return False
        if self.query is not None:
            if callable(self.query):
                return bool(self.query(query))
            return self.query in query
        return True

    def picks(self, n: int) -> bool:
        """Whether the n-th match (1-based) gets the fault."""
        if self.first is not None:
            return n <= self.first
        if self.nth is not None:
            return n in self.nth
        if self.after is not None:
            return n > self.after
        return True


@dataclass
class Logged:
    method: str
    path: str
    query: dict
    headers: dict = field(default_factory=dict)  # request headers, names lower-cased
    status: int | None = None       # what the client got (None: connection closed without answer)
    fault: str | None = None
    bytes_in: int = 0               # request body bytes read from the client
    bytes_out: int = 0              # response body bytes sent to the client
    seconds: float = 0.0
    started: float = 0.0            # time.monotonic() when the request arrived

    def has(self, param: str) -> bool:
        return param in self.query

    @property
    def range(self) -> str | None:
        return self.headers.get("range")


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, proxy: "FaultProxy"):
        self.proxy = proxy
        self.open_sockets: set = set()
        self.sockets_lock = threading.Lock()
        super().__init__((proxy.listen_host, 0), _Handler)

    def process_request_thread(self, request, client_address):
        with self.sockets_lock:
            self.open_sockets.add(request)
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self.sockets_lock:
                self.open_sockets.discard(request)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format, *args):  # noqa: A002  (the log is proxy.log, not stderr)
        pass

    def handle_expect_100(self):
        # Answered in _body_reader once we know the request is read at all.
        self._expect_100 = True
        return True

    # Every method is proxied the same way.
    def do_GET(self):
        self._proxy()

    do_PUT = do_POST = do_DELETE = do_HEAD = do_GET

    # ---- request body ---------------------------------------------------------
    def _body_chunks(self, limit: int | None = None):
        """Yields the request body in pieces (de-chunked), at most `limit` bytes."""
        if getattr(self, "_expect_100", False):
            self._expect_100 = False
            self.wfile.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            self.wfile.flush()
        remaining_limit = limit
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            while True:
                size_line = self.rfile.readline(1024)
                if not size_line:
                    raise ConnectionError("client closed the connection inside a chunked body")
                size = int(size_line.split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline(1024) not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    return
                left = size
                while left:
                    n = min(left, CHUNK)
                    if remaining_limit is not None:
                        n = min(n, remaining_limit)
                        if n == 0:
                            return
                    data = self.rfile.read(n)
                    if not data:
                        raise ConnectionError("client closed the connection inside a chunk")
                    left -= len(data)
                    if remaining_limit is not None:
                        remaining_limit -= len(data)
                    yield data
                self.rfile.readline(16)  # CRLF after the chunk
        else:
            left = int(self.headers.get("Content-Length") or 0)
            if remaining_limit is not None:
                left = min(left, remaining_limit)
            while left:
                data = self.rfile.read(min(left, CHUNK))
                if not data:
                    raise ConnectionError("client closed the connection inside the body")
                left -= len(data)
                yield data

    def _drain(self, entry: Logged) -> None:
        for piece in self._body_chunks():
            entry.bytes_in += len(piece)

    # ---- the proxy ---------------------------------------------------------------
    def _proxy(self):
        t0 = time.monotonic()
        split = urllib.parse.urlsplit(self.path)
        query = dict(urllib.parse.parse_qsl(split.query, keep_blank_values=True))
        entry = Logged(self.command, split.path, query, {k.lower(): v for k, v in self.headers.items()}, started=t0)
        proxy = self.server.proxy
        fault = proxy._pick(self.command, split.path, query)
        entry.fault = fault.action if fault else None
        proxy._record(entry)
        self._reset = fault is not None and fault.action.startswith("reset_")
        try:
            if fault is None or fault.action == "delay":
                if fault is not None:
                    time.sleep(fault.delay_s)
                self._forward(entry, drop_after=None)
            elif fault.action in ("drop_response", "reset_response"):
                self._forward(entry, drop_after=fault.keep_bytes if fault.keep_bytes is not None else -1)
            elif fault.action in ("drop_request", "reset_request"):
                total = int(self.headers.get("Content-Length") or 0)
                keep = fault.keep_bytes if fault.keep_bytes is not None else total // 2
                for piece in self._body_chunks(limit=keep):
                    entry.bytes_in += len(piece)
                self._hang_up()
            else:
                self._drain(entry)
                if fault.action == "slowdown":
                    self._answer(entry, 503, s3_error_xml("SlowDown", "Please reduce your request rate.",
                                                          split.path))
                elif fault.action == "internal":
                    self._answer(entry, 500, s3_error_xml(
                        "InternalError", "We encountered an internal error. Please try again.", split.path))
                else:  # error200
                    body = s3_error_xml(fault.code, "We encountered an internal error. Please try again.",
                                        split.path)
                    self._answer(entry, 200, (b" \n" * 8 if fault.pad else b"") + body)
        except (ConnectionError, OSError, http.client.HTTPException):
            self.close_connection = True
        finally:
            self._expect_100 = False
            entry.seconds = time.monotonic() - t0

    def _answer(self, entry: Logged, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("x-amz-request-id", "FAULTPROXY")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
            entry.bytes_out += len(body)
        entry.status = status

    def _hang_up(self) -> None:
        """Closes the client's connection: a FIN after what was sent, or for the reset_ actions an RST
        (SO_LINGER 0 then close), which discards what the client sent and was not read."""
        self.close_connection = True
        try:
            self.wfile.flush()
            if getattr(self, "_reset", False):
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                self.connection.close()
            else:
                self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _forward(self, entry: Logged, drop_after: int | None) -> None:
        proxy = self.server.proxy
        up = http.client.HTTPConnection(proxy.upstream_host, proxy.upstream_port, timeout=proxy.upstream_timeout)
        try:
            up.putrequest(self.command, proxy._rewrite_target(self.path), skip_host=True,
                          skip_accept_encoding=True)
            chunked = "chunked" in self.headers.get("Transfer-Encoding", "").lower()
            for k, v in self.headers.items():
                if k.lower() not in _HOP_BY_HOP:
                    up.putheader(k, v)
            if chunked:
                up.putheader("Transfer-Encoding", "chunked")
            up.endheaders()
            for piece in self._body_chunks():
                entry.bytes_in += len(piece)
                up.send(b"%x\r\n%b\r\n" % (len(piece), piece) if chunked else piece)
            if chunked:
                up.send(b"0\r\n\r\n")
            resp = up.getresponse()
            self._relay(entry, resp, drop_after)
        finally:
            up.close()

    def _relay(self, entry: Logged, resp: http.client.HTTPResponse, drop_after: int | None) -> None:
        length = resp.getheader("Content-Length")
        has_body = self.command != "HEAD" and resp.status not in (204, 304) and not 100 <= resp.status < 200
        self.send_response_only(resp.status, resp.reason)
        for k, v in resp.getheaders():
            if k.lower() not in _HOP_BY_HOP and k.lower() not in ("date", "server"):
                self.send_header(k, v)
        self.send_header("Date", self.date_time_string())
        chunked_out = has_body and length is None
        if chunked_out:
            self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        entry.status = resp.status
        if not has_body:
            resp.read()
            if drop_after is not None:
                self._hang_up()
            return
        budget = None
        if drop_after is not None:
            budget = drop_after if drop_after >= 0 else (int(length) // 2 if length else CHUNK // 2)
        while True:
            piece = resp.read(CHUNK)
            if not piece:
                break
            if budget is not None:
                piece = piece[:budget]
                budget -= len(piece)
            if piece:
                self.wfile.write(b"%x\r\n%b\r\n" % (len(piece), piece) if chunked_out else piece)
                entry.bytes_out += len(piece)
            if budget == 0:
                self._hang_up()
                return
        if budget is not None:  # body shorter than the cut: still drop before the end
            self._hang_up()
            return
        if chunked_out:
            self.wfile.write(b"0\r\n\r\n")


class FaultProxy:
    """The proxy; see the module docstring."""

    def __init__(self, upstream: str, upstream_timeout: float = 120.0, max_keys: int | None = None,
                 listen_host: str = "127.0.0.1"):
        u = urllib.parse.urlsplit(upstream)
        if u.scheme != "http" or not u.hostname or not u.port:
            raise ValueError(f"upstream {upstream!r} must be http://host:port")
        self.upstream_host = u.hostname
        self.upstream_port = u.port
        self.upstream_timeout = upstream_timeout
        self.max_keys = max_keys
        self.listen_host = listen_host
        self._lock = threading.Lock()
        self._faults: list[Fault] = []
        self._log: list[Logged] = []
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    @property
    def endpoint(self) -> str:
        return f"http://{self.listen_host}:{self.port}"

    def start(self) -> "FaultProxy":
        self._server = _Server(self)
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.1},
                                        name="fault-proxy", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is None:
            return
        self._server.shutdown()
        self._server.server_close()
        with self._server.sockets_lock:
            for s in list(self._server.open_sockets):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        self._thread.join(timeout=10)
        self._server = None

    def __enter__(self) -> "FaultProxy":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # ---- plan and log -------------------------------------------------------------
    def add(self, *faults: Fault) -> "FaultProxy":
        with self._lock:
            self._faults.extend(faults)
        return self

    def clear(self) -> None:
        """Removes every fault (the log stays)."""
        with self._lock:
            self._faults.clear()

    def reset_log(self) -> None:
        with self._lock:
            self._log.clear()

    @property
    def log(self) -> list[Logged]:
        with self._lock:
            return list(self._log)

    def requests(self, method: str | None = None, query: str | None = None,
                 path: str | None = None) -> list[Logged]:
        """Logged requests filtered like a Fault's filters."""
        rx = re.compile(path) if path else None
        return [e for e in self.log if (method is None or e.method == method)
                and (query is None or query in e.query) and (rx is None or rx.search(e.path))]

    def faults_applied(self) -> dict:
        with self._lock:
            return {f"{i}:{f.action}": f.applied for i, f in enumerate(self._faults)}

    def _rewrite_target(self, target: str) -> str:
        """With max_keys, a ListObjectsV2's max-keys is lowered to it (or set, if absent)."""
        if self.max_keys is None:
            return target
        split = urllib.parse.urlsplit(target)
        pairs = urllib.parse.parse_qsl(split.query, keep_blank_values=True)
        if not any(k == "list-type" for k, _ in pairs):
            return target
        if not any(k == "max-keys" for k, _ in pairs):
            pairs.append(("max-keys", str(self.max_keys)))
        pairs = [(k, str(min(int(v), self.max_keys)) if k == "max-keys" and v.isdigit() else v)
                 for k, v in pairs]
        query = urllib.parse.urlencode(pairs, quote_via=urllib.parse.quote, safe="-_.~")
        return urllib.parse.urlunsplit(("", "", split.path, query, ""))

    def _pick(self, method: str, path: str, query: dict) -> Fault | None:
        with self._lock:
            for f in self._faults:
                if f.filters_match(method, path, query):
                    f.matched += 1
                    if f.picks(f.matched):
                        f.applied += 1
                        return f
            return None

    def _record(self, entry: Logged) -> None:
        with self._lock:
            self._log.append(entry)
