"""The bounded HTTP server on real sockets: round trips, every limit with its status and JSON
error, read and write timeouts, the connection cap, handler failures, and `stop()` against idle,
trickling, half-written and in-flight connections."""

from __future__ import annotations

import contextlib
import dataclasses
import http.client
import json
import logging
import os
import resource
import socket
import threading
import time
import urllib.error
import urllib.request

import pytest

from keras_attn.serving.http_server import Headers, HttpRequest, HttpResponse, HttpServer

HOST = "127.0.0.1"
# Short timeouts and small caps, so each limit is reached in a fraction of a second.
SMALL = {
    "read_timeout_seconds": 1.0,
    "write_timeout_seconds": 1.0,
    "max_body_bytes": 1000,
    "max_header_bytes": 1024,
}
CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def echo(request: HttpRequest) -> HttpResponse:
    payload = {
        "method": request.method,
        "target": request.target,
        "content_type": request.headers.get("content-type"),
        "body": request.body.decode("latin-1"),
    }
    return HttpResponse(200, json.dumps(payload).encode("utf-8"))


def echoed(method: str, target: str, body: bytes = b"", content_type: str | None = None) -> dict:
    return {
        "method": method,
        "target": target,
        "content_type": content_type,
        "body": body.decode("latin-1"),
    }


@pytest.fixture(autouse=True)
def _reset_keras_state():
    """Replaces tests/conftest.py's Keras reset (0.2 s a test): nothing here uses Keras."""
    yield


@pytest.fixture
def serve():
    """Starts servers (echo, small limits unless told otherwise); stops them after the test."""
    servers = []

    def start(handler=echo, host=HOST, **options) -> HttpServer:
        server = HttpServer(handler, host, 0, **{**SMALL, **options}).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop(0)


@dataclasses.dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes

    @property
    def error(self) -> str:
        """The message of a `{"error": message}` body."""
        assert self.headers["content-type"] == "application/json"
        payload = json.loads(self.body)
        assert list(payload) == ["error"]
        return payload["error"]


def parse_reply(data: bytes, head_only: bool = False) -> Reply:
    head, blank, body = data.partition(b"\r\n\r\n")
    assert blank, data
    status_line, *lines = head.decode("latin-1").split("\r\n")
    version, status, reason = status_line.split(" ", 2)
    assert (version, reason) == ("HTTP/1.1", http.HTTPStatus(int(status)).phrase)
    headers = {}
    for line in lines:
        name, _, value = line.partition(":")
        headers[name.lower()] = value.strip()
    assert headers["connection"] == "close"
    if not head_only:
        assert int(headers["content-length"]) == len(body)
    return Reply(int(status), headers, body)


def connect(port: int, host: str = HOST) -> socket.socket:
    return socket.create_connection((host, port), timeout=5)


def read_all(sock: socket.socket) -> bytes:
    chunks = []
    while chunk := sock.recv(2**16):
        chunks.append(chunk)
    return b"".join(chunks)


def exchange(port: int, data: bytes) -> Reply:
    """Sends raw bytes (the write side left open) and reads the reply up to the server's EOF."""
    with connect(port) as sock:
        sock.sendall(data)
        return parse_reply(read_all(sock))


def is_closed(sock: socket.socket, timeout: float) -> bool:
    """Whether the server closes `sock` (EOF or reset) within `timeout`, dropping any reply."""
    sock.settimeout(timeout)
    try:
        while sock.recv(2**16):
            pass
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False
    return True


def server_threads(port: int) -> list[threading.Thread]:
    return [thread for thread in threading.enumerate() if thread.name == f"http-server-{port}"]


def handler_threads(port: int) -> list[threading.Thread]:
    prefix = f"http-handler-{port}-"
    return [thread for thread in threading.enumerate() if thread.name.startswith(prefix)]


# ---------------------------------------------------------------------- round trips


def test_get_with_urllib(serve):
    server = serve()
    url = f"http://{HOST}:{server.port}/v1/models/x?a=b"
    with NO_PROXY.open(url, timeout=5) as response:
        assert response.status == 200
        assert response.headers["Content-Type"] == "application/json"
        assert response.headers["Connection"] == "close"
        assert json.loads(response.read()) == echoed("GET", "/v1/models/x?a=b")


def test_post_with_content_length(serve):
    server = serve()
    reply = exchange(
        server.port,
        b"POST /p HTTP/1.1\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello",
    )
    assert reply.status == 200
    assert reply.headers["content-type"] == "application/json"
    assert json.loads(reply.body) == echoed("POST", "/p", b"hello", "text/plain")


def test_post_with_http_client_echoes_the_body(serve):
    server = serve()
    connection = http.client.HTTPConnection(HOST, server.port, timeout=5)
    body = b'{"instances": ["a b"]}'
    connection.request("POST", "/v1/models/x:predict", body, {"CONTENT-TYPE": "text/plain"})
    response = connection.getresponse()
    assert (response.status, response.reason) == (200, "OK")
    assert json.loads(response.read()) == echoed("POST", "/v1/models/x:predict", body, "text/plain")
    connection.close()


def test_chunked_body_with_http_client(serve):
    server = serve()
    connection = http.client.HTTPConnection(HOST, server.port, timeout=5)
    connection.request("POST", "/c", iter([b"hello ", b"chunked ", b"world"]))  # no length
    response = connection.getresponse()
    assert response.status == 200
    assert json.loads(response.read())["body"] == "hello chunked world"
    connection.close()


def test_chunked_body_with_extensions_and_trailers(serve):
    server = serve()
    reply = exchange(
        server.port,
        b"POST /c HTTP/1.1\r\nTransfer-Encoding: Chunked\r\n\r\n"
        b"5;name=value\r\nhello\r\nA \r\n, chunked!\r\n000\r\nX-Trailer: t\r\n\r\n",
    )
    assert reply.status == 200
    assert json.loads(reply.body)["body"] == "hello, chunked!"


def test_expect_100_continue_with_http_client(serve):
    server = serve(max_body_bytes=10_000)
    connection = http.client.HTTPConnection(HOST, server.port, timeout=5)
    body = b"x" * 5000
    connection.request("POST", "/e", body, {"Expect": "100-continue"})
    response = connection.getresponse()  # skips the interim 100 Continue
    assert response.status == 200
    assert json.loads(response.read())["body"] == body.decode()
    connection.close()


@pytest.mark.parametrize(
    "head, body",
    [
        (b"Content-Length: 11\r\n", b"hello world"),
        (b"Transfer-Encoding: chunked\r\n", b"b\r\nhello world\r\n0\r\n\r\n"),
    ],
)
def test_expect_100_continue_raw(serve, head, body):
    server = serve()
    with connect(server.port) as sock:
        sock.sendall(b"POST /e HTTP/1.1\r\nExpect: 100-Continue\r\n" + head + b"\r\n")
        interim = b""
        while len(interim) < len(CONTINUE) and (chunk := sock.recv(len(CONTINUE) - len(interim))):
            interim += chunk
        assert interim == CONTINUE  # before any byte of the body was sent
        sock.sendall(body)
        reply = parse_reply(read_all(sock))
    assert reply.status == 200
    assert json.loads(reply.body)["body"] == "hello world"


def test_expect_100_continue_over_the_limit_is_413_without_continue(serve):
    server = serve()
    reply = exchange(
        server.port, b"POST /e HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 1001\r\n\r\n"
    )
    assert reply.status == 413
    assert reply.error == "Request body larger than the server's limit of 1000 bytes"


def test_no_continue_without_a_body_or_for_http_1_0(serve):
    server = serve()
    reply = exchange(server.port, b"GET /g HTTP/1.1\r\nExpect: 100-continue\r\n\r\n")
    assert reply.status == 200  # parse_reply would fail on a 100 Continue before the answer
    reply = exchange(
        server.port, b"POST /g HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\nhi"
    )
    assert (reply.status, json.loads(reply.body)["body"]) == (200, "hi")


def test_http_1_0_leading_empty_lines_and_any_method(serve):
    server = serve()
    reply = exchange(server.port, b"\r\n\r\nGET /old HTTP/1.0\r\n\r\n")
    assert (reply.status, json.loads(reply.body)) == (200, echoed("GET", "/old"))
    reply = exchange(server.port, b"BREW /pot HTTP/1.1\r\n\r\n")
    assert (reply.status, json.loads(reply.body)) == (200, echoed("BREW", "/pot"))


def test_head_gets_the_length_but_no_body(serve):
    server = serve()
    with connect(server.port) as sock:
        sock.sendall(b"HEAD /h HTTP/1.1\r\n\r\n")
        reply = parse_reply(read_all(sock), head_only=True)
    assert reply.status == 200
    assert reply.body == b""
    assert int(reply.headers["content-length"]) == len(json.dumps(echoed("HEAD", "/h")))


def test_a_response_carries_the_handler_s_header_fields(serve):
    fields = (
        ("Content-Security-Policy", "default-src 'none'"),
        ("X-Content-Type-Options", "nosniff"),
    )
    server = serve(lambda request: HttpResponse(200, b"<p>", "text/html", fields))
    for method in (b"GET", b"HEAD"):
        with connect(server.port) as sock:
            sock.sendall(method + b" / HTTP/1.1\r\n\r\n")
            reply = parse_reply(read_all(sock), head_only=method == b"HEAD")
        assert reply.headers["content-security-policy"] == "default-src 'none'"
        assert reply.headers["x-content-type-options"] == "nosniff"
        assert reply.headers["content-type"] == "text/html"
    bad = serve(lambda request: HttpResponse(200, b"", headers=(("X-Bad", "a\r\nSet-Cookie: x"),)))
    assert exchange(bad.port, b"GET / HTTP/1.1\r\n\r\n").status == 500


def test_body_and_head_at_the_limits_are_accepted(serve):
    server = serve()
    body = bytes(range(256)) * 3 + b"b" * 232  # 1000 bytes
    reply = exchange(server.port, b"POST /b HTTP/1.1\r\nContent-Length: 1000\r\n\r\n" + body)
    assert (reply.status, json.loads(reply.body)["body"]) == (200, body.decode("latin-1"))
    prefix = b"GET / HTTP/1.1\r\nX: "
    head = prefix + b"a" * (1024 - len(prefix) - 4) + b"\r\n\r\n"
    assert len(head) == 1024
    assert exchange(server.port, head).status == 200
    hundred = b"GET / HTTP/1.1\r\n" + b"a:b\r\n" * 100 + b"\r\n"
    assert exchange(server.port, hundred).status == 200
    same_lengths = b"POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 003\r\n\r\nabc"
    assert exchange(server.port, same_lengths).status == 200


def test_headers_lookups_are_case_insensitive():
    headers = Headers([("Content-Length", "3"), ("X-A", "1"), ("x-a", "2")])
    assert headers["content-length"] == headers["CONTENT-LENGTH"] == "3"
    assert headers["X-a"] == "1, 2"
    assert list(headers) == ["Content-Length", "X-A"]
    assert len(headers) == 2
    assert "x-A" in headers and "y" not in headers and 1 not in headers


# ---------------------------------------------------------------------- limits

MALFORMED_LINE = "Malformed request line"
MALFORMED_HEADER = "Malformed header line"
MALFORMED_CHUNK = "Malformed chunked body"
TOO_LARGE_BODY = "Request body larger than the server's limit of 1000 bytes"
TOO_LARGE_HEAD = "Request headers larger than the server's limit of 1024 bytes"


VERSION_NOT_SUPPORTED = "HTTP version not supported (HTTP/1.0 and HTTP/1.1 are)"
INVALID_LENGTH = "Invalid Content-Length header"
CONFLICTING_LENGTHS = "Conflicting Content-Length headers"
NOT_CHUNKED = "Transfer-Encoding not implemented (only chunked is)"
TOO_MANY_LINES = "More than 100 request header lines"
CHUNKED = b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
LIMIT_CASES = {
    "garbage": (b"GARBAGE\r\n\r\n", 400, MALFORMED_LINE),
    "http-0.9-line": (b"GET /\r\n\r\n", 400, MALFORMED_LINE),
    "four-parts": (b"GET / HTTP/1.1 x\r\n\r\n", 400, MALFORMED_LINE),
    "double-space": (b"GET  / HTTP/1.1\r\n\r\n", 400, MALFORMED_LINE),
    "method-not-a-token": (b"G(T / HTTP/1.1\r\n\r\n", 400, MALFORMED_LINE),
    "control-in-target": (b"GET /\x01 HTTP/1.1\r\n\r\n", 400, MALFORMED_LINE),
    "version-syntax": (b"GET / HTTP/1\r\n\r\n", 400, MALFORMED_LINE),
    "http-2.0": (b"GET / HTTP/2.0\r\n\r\n", 505, VERSION_NOT_SUPPORTED),
    "http-0.9": (b"GET / HTTP/0.9\r\n\r\n", 505, VERSION_NOT_SUPPORTED),
    "no-colon": (b"GET / HTTP/1.1\r\nNoColon\r\n\r\n", 400, MALFORMED_HEADER),
    "space-in-name": (b"GET / HTTP/1.1\r\nBad Name: x\r\n\r\n", 400, MALFORMED_HEADER),
    "space-before-colon": (b"GET / HTTP/1.1\r\nName : x\r\n\r\n", 400, MALFORMED_HEADER),
    "empty-name": (b"GET / HTTP/1.1\r\n: x\r\n\r\n", 400, MALFORMED_HEADER),
    "folded": (b"GET / HTTP/1.1\r\nA: b\r\n folded\r\n\r\n", 400, MALFORMED_HEADER),
    "nul-in-value": (b"GET / HTTP/1.1\r\nA: b\x00c\r\n\r\n", 400, MALFORMED_HEADER),
    "length-abc": (b"POST / HTTP/1.1\r\nContent-Length: abc\r\n\r\n", 400, INVALID_LENGTH),
    "length-negative": (b"POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", 400, INVALID_LENGTH),
    "length-plus": (b"POST / HTTP/1.1\r\nContent-Length: +5\r\n\r\n", 400, INVALID_LENGTH),
    "length-spaced": (b"POST / HTTP/1.1\r\nContent-Length: 1 2\r\n\r\n", 400, INVALID_LENGTH),
    "two-lengths": (
        b"POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
        400,
        CONFLICTING_LENGTHS,
    ),
    "length-list": (b"POST / HTTP/1.1\r\nContent-Length: 3, 4\r\n\r\n", 400, CONFLICTING_LENGTHS),
    "length-and-chunked": (
        b"POST / HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
        400,
        "Both Content-Length and Transfer-Encoding headers",
    ),
    "chunked-http-1.0": (
        b"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n",
        400,
        "Transfer-Encoding in an HTTP/1.0 request",
    ),
    "gzip": (b"POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", 501, NOT_CHUNKED),
    "gzip-chunked": (
        b"POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
        501,
        NOT_CHUNKED,
    ),
    "chunk-size-not-hex": (CHUNKED + b"zz\r\n", 400, MALFORMED_CHUNK),
    "chunk-size-negative": (CHUNKED + b"-1\r\n", 400, MALFORMED_CHUNK),
    "chunk-without-crlf": (CHUNKED + b"5\r\nhelloXX", 400, MALFORMED_CHUNK),
    "length-over": (b"POST / HTTP/1.1\r\nContent-Length: 1001\r\n\r\n", 413, TOO_LARGE_BODY),
    "length-huge": (
        b"POST / HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n",
        413,
        TOO_LARGE_BODY,
    ),
    # The size line that passes the cap is refused before any byte of its chunk is sent.
    "chunks-over": (CHUNKED + b"3e8\r\n" + b"a" * 1000 + b"\r\n1\r\n", 413, TOO_LARGE_BODY),
    "chunk-size-huge": (CHUNKED + b"fffffffffffffffffffffffff\r\n", 413, TOO_LARGE_BODY),
    "long-header": (b"GET / HTTP/1.1\r\nX: " + b"a" * 1100 + b"\r\n\r\n", 431, TOO_LARGE_HEAD),
    "long-request-line": (b"GET /" + b"a" * 1100 + b" HTTP/1.1\r\n\r\n", 431, TOO_LARGE_HEAD),
    "head-1025-bytes": (
        b"GET / HTTP/1.1\r\nX: " + b"a" * 1002 + b"\r\n\r\n",
        431,
        TOO_LARGE_HEAD,
    ),
    "101-header-lines": (b"GET / HTTP/1.1\r\n" + b"a:b\r\n" * 101 + b"\r\n", 431, TOO_MANY_LINES),
    "101-trailer-lines": (CHUNKED + b"0\r\n" + b"t:x\r\n" * 101, 431, TOO_MANY_LINES),
}


@pytest.mark.parametrize(
    "request_bytes, status, message", LIMIT_CASES.values(), ids=LIMIT_CASES.keys()
)
def test_limits_and_malformed_requests(serve, request_bytes, status, message):
    server = serve()
    start = time.monotonic()
    reply = exchange(server.port, request_bytes)
    assert (reply.status, reply.error) == (status, message)
    assert time.monotonic() - start < 0.9  # answered at once, not at the read timeout


def test_an_oversized_body_sent_anyway_still_gets_its_413(serve):
    """The server drops the unread body after answering, so the client reads the 413 instead of
    a reset connection."""
    server = serve()
    connection = http.client.HTTPConnection(HOST, server.port, timeout=5)
    connection.request("POST", "/big", b"x" * 2**20)
    response = connection.getresponse()
    assert response.status == 413
    assert json.loads(response.read()) == {"error": TOO_LARGE_BODY}
    connection.close()


# ---------------------------------------------------------------------- timeouts and connections


@pytest.mark.parametrize(
    "head",
    [b"GET / HTTP/1.1\r\nX-Slow: ", b"POST / HTTP/1.1\r\nContent-Length: 100\r\n\r\n"],
    ids=["headers", "body"],
)
def test_a_trickling_client_is_cut_at_the_read_timeout_with_408(serve, head):
    server = serve(read_timeout_seconds=1.0)
    with connect(server.port) as sock:
        start = time.monotonic()
        sock.sendall(head)
        sock.settimeout(0.2)
        data = b""
        while not data and time.monotonic() - start < 4:
            try:
                data = sock.recv(2**16)
            except TimeoutError:
                sock.sendall(b"a")  # one byte every 0.2 s
        elapsed = time.monotonic() - start
        sock.settimeout(5)
        reply = parse_reply(data + read_all(sock))
    assert (reply.status, reply.error) == (408, "Request not complete within 1 s")
    assert 0.9 < elapsed < 2.0


def test_an_idle_connection_is_closed_at_the_read_timeout(serve):
    server = serve(read_timeout_seconds=1.0)
    with connect(server.port) as sock:
        start = time.monotonic()
        assert sock.recv(100) == b""  # closed, without an answer
        elapsed = time.monotonic() - start
    assert 0.9 < elapsed < 2.0


def test_connections_beyond_max_connections_get_503(serve):
    server = serve(max_connections=2)
    first, second = connect(server.port), connect(server.port)
    try:
        reply = exchange(server.port, b"GET / HTTP/1.1\r\n\r\n")
        assert (reply.status, reply.error) == (503, "Too many open connections")
        first.close()  # frees a slot once the server sees the close
        deadline = time.monotonic() + 2
        while (status := exchange(server.port, b"GET / HTTP/1.1\r\n\r\n").status) == 503:
            assert time.monotonic() < deadline, "the closed connection's slot was not freed"
            time.sleep(0.05)
        assert status == 200
    finally:
        first.close()
        second.close()


def test_a_client_that_never_reads_is_dropped_at_the_write_timeout(serve):
    big = b"x" * 16 * 2**20

    def handler(request: HttpRequest) -> HttpResponse:
        return HttpResponse(200, big if request.target == "/big" else b"{}")

    server = serve(handler, max_connections=1, num_threads=1, write_timeout_seconds=1.0)
    reader = socket.socket()
    reader.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    reader.settimeout(5)
    reader.connect((HOST, server.port))
    try:
        start = time.monotonic()
        reader.sendall(b"GET /big HTTP/1.1\r\n\r\n")
        # The blocked write holds the only connection slot...
        assert exchange(server.port, b"GET / HTTP/1.1\r\n\r\n").status == 503
        # ...until the write timeout drops the connection.
        while (status := exchange(server.port, b"GET / HTTP/1.1\r\n\r\n").status) == 503:
            assert time.monotonic() - start < 3, "the never-reading client still holds its slot"
            time.sleep(0.05)
        assert status == 200
        assert time.monotonic() - start > 0.9
        received = 0
        with contextlib.suppress(ConnectionResetError):
            while chunk := reader.recv(2**20):
                received += len(chunk)
        assert received < len(big)  # the rest of the response was dropped
    finally:
        reader.close()


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts descriptors in /proc")
def test_accepting_pauses_while_out_of_descriptors_then_resumes(serve, caplog):
    server = serve()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    fillers, client = [], None
    try:
        with caplog.at_level(logging.WARNING, logger="keras_attn.serving.http_server"):
            limit = len(os.listdir("/proc/self/fd")) + 50
            resource.setrlimit(resource.RLIMIT_NOFILE, (min(limit, soft), hard))
            with pytest.raises(OSError):
                while len(fillers) < 100:
                    fillers.append(socket.socket())
            fillers.pop().close()
            client = socket.socket()  # the last descriptor: the server cannot accept it
            client.settimeout(5)
            client.connect((HOST, server.port))
            deadline = time.monotonic() + 3
            while not caplog.records:
                assert time.monotonic() < deadline, "accept() did not fail"
                time.sleep(0.02)
            for filler in fillers:
                filler.close()
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
            paused = time.monotonic()
        [record] = caplog.records
        assert record.getMessage() == "HTTP server cannot accept connections: Too many open files"
        client.sendall(b"GET /later HTTP/1.1\r\n\r\n")
        reply = parse_reply(read_all(client))
        assert (reply.status, json.loads(reply.body)) == (200, echoed("GET", "/later"))
        assert time.monotonic() - paused < 0.5 + 1.5
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        for sock in [*fillers, client]:
            if sock is not None:
                sock.close()


def test_a_handler_exception_is_logged_and_answered_500_without_its_text(serve, caplog):
    def handler(request: HttpRequest) -> HttpResponse:
        if request.target == "/status":
            return HttpResponse(99, b"")
        raise RuntimeError("secret /srv/models/x failed")

    server = serve(handler)
    with caplog.at_level(logging.ERROR, logger="keras_attn.serving.http_server"):
        reply = exchange(server.port, b"GET /boom HTTP/1.1\r\n\r\n")
        bad_status = exchange(server.port, b"GET /status HTTP/1.1\r\n\r\n")
    assert (reply.status, reply.body) == (500, b'{"error": "Internal error"}')
    assert (bad_status.status, bad_status.error) == (500, "Internal error")
    failures = [record for record in caplog.records if record.exc_info]
    assert [record.getMessage() for record in failures] == [
        "HTTP handler failed on GET /boom",
        "HTTP handler failed on GET /status",
    ]
    assert "secret" in str(failures[0].exc_info[1])


def test_a_urllib_client_sees_errors_as_http_errors(serve):
    server = serve(max_body_bytes=10)
    request = urllib.request.Request(f"http://{HOST}:{server.port}/x", data=b"x" * 11)
    with pytest.raises(urllib.error.HTTPError) as info:
        NO_PROXY.open(request, timeout=5)
    assert info.value.code == 413
    assert json.loads(info.value.read()) == {
        "error": "Request body larger than the server's limit of 10 bytes"
    }


def has_ipv6_loopback() -> bool:
    if not socket.has_ipv6:
        return False
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
    except OSError:
        return False
    return True


@pytest.mark.skipif(not has_ipv6_loopback(), reason="no IPv6 loopback on this host")
def test_ipv6_loopback(serve):
    server = serve(host="::1")
    with connect(server.port, "::1") as sock:
        sock.sendall(b"GET /six HTTP/1.1\r\n\r\n")
        reply = parse_reply(read_all(sock))
    assert (reply.status, json.loads(reply.body)) == (200, echoed("GET", "/six"))


# ---------------------------------------------------------------------- start and stop


def test_start_raises_oserror_on_a_port_in_use_and_leaves_nothing_running():
    with socket.create_server((HOST, 0)) as taken:
        port = taken.getsockname()[1]
        server = HttpServer(echo, HOST, port)
        with pytest.raises(OSError):
            server.start()
        assert server_threads(port) == []
        start = time.monotonic()
        server.stop()
        assert time.monotonic() - start < 0.5


def test_stop_drains_the_in_flight_request_and_closes_the_rest_at_once(serve):
    entered, release = threading.Event(), threading.Event()

    def handler(request: HttpRequest) -> HttpResponse:
        if request.target == "/slow":
            entered.set()
            release.wait(10)
            return HttpResponse(200, b'{"slow": true}')
        return echo(request)

    server = serve(handler, read_timeout_seconds=30)
    port = server.port
    answer = {}

    def slow_request() -> None:
        connection = http.client.HTTPConnection(HOST, port, timeout=10)
        connection.request("GET", "/slow")
        response = connection.getresponse()
        answer["status"], answer["body"] = response.status, response.read()

    client = threading.Thread(target=slow_request)
    client.start()
    assert entered.wait(5)
    n = 5
    idle = [connect(port) for _ in range(n)]
    trickling = [connect(port) for _ in range(n)]
    half_written = [connect(port) for _ in range(n)]
    for sock in trickling:
        sock.sendall(b"GET / HTTP/1.1\r\nX-Slow: ")
    for sock in half_written:
        sock.sendall(b"POST / HTTP/1.1\r\nContent-Length: 100\r\n\r\n" + b"b" * 10)
    trickle_done = threading.Event()

    def trickle() -> None:
        while not trickle_done.wait(0.2):
            for sock in trickling:
                try:
                    sock.send(b"a")
                except OSError:
                    pass

    trickler = threading.Thread(target=trickle)
    trickler.start()
    stopped = {}

    def stop() -> None:
        server.stop(grace=3.0)
        stopped["at"] = time.monotonic()

    try:
        start = time.monotonic()
        stopper = threading.Thread(target=stop)
        stopper.start()
        for sock in idle + trickling + half_written:
            assert is_closed(sock, timeout=2)
        assert time.monotonic() - start < 1.5
        assert stopper.is_alive() and client.is_alive()  # the slow request is still running
        with pytest.raises(ConnectionRefusedError):
            connect(port).close()  # no new connections
        released = time.monotonic()
        release.set()
        stopper.join(5)
        client.join(5)
        assert answer == {"status": 200, "body": b'{"slow": true}'}
        assert stopped["at"] - start < 3.0 + 1.0
        assert stopped["at"] - released < 1.0  # returns once drained, not after the whole grace
        assert server_threads(port) == []
    finally:
        release.set()
        trickle_done.set()
        trickler.join(5)
        for sock in idle + trickling + half_written:
            sock.close()
    again = HttpServer(echo, HOST, port).start()  # the port was released
    try:
        assert exchange(port, b"GET /again HTTP/1.1\r\n\r\n").status == 200
    finally:
        again.stop(0)


def test_stop_gives_up_on_a_handler_that_outlives_grace(serve):
    entered, release = threading.Event(), threading.Event()

    def handler(request: HttpRequest) -> HttpResponse:
        entered.set()
        release.wait(10)
        return HttpResponse(200, b"{}")

    server = serve(handler)
    port = server.port
    outcome = {}

    def request() -> None:
        connection = http.client.HTTPConnection(HOST, port, timeout=10)
        connection.request("GET", "/stuck")
        try:
            outcome["status"] = connection.getresponse().status
        except (http.client.RemoteDisconnected, ConnectionError) as error:
            outcome["error"] = type(error).__name__

    client = threading.Thread(target=request)
    client.start()
    try:
        assert entered.wait(5)
        start = time.monotonic()
        server.stop(grace=0.5)
        elapsed = time.monotonic() - start
        assert 0.4 < elapsed < 0.5 + 1.0
        client.join(5)
        assert "error" in outcome, outcome  # closed without an answer
        assert server_threads(port) == []
        [stuck] = handler_threads(port)  # still inside the handler, a daemon thread
        assert stuck.daemon
        release.set()
        stuck.join(2)
        assert handler_threads(port) == []  # the late response was dropped, the thread ended
    finally:
        release.set()


def test_a_second_stop_with_a_shorter_grace_shortens_the_wait(serve):
    entered, release = threading.Event(), threading.Event()

    def handler(request: HttpRequest) -> HttpResponse:
        entered.set()
        release.wait(10)
        return HttpResponse(200, b"{}")

    server = serve(handler)
    received = []

    def request() -> None:
        with connect(server.port) as sock, contextlib.suppress(ConnectionResetError):
            sock.sendall(b"GET / HTTP/1.1\r\n\r\n")
            received.append(read_all(sock))

    client = threading.Thread(target=request)
    client.start()
    try:
        assert entered.wait(5)
        start = time.monotonic()
        first = threading.Thread(target=server.stop, args=(30.0,))
        first.start()
        time.sleep(0.1)
        server.stop(0.2)
        first.join(2)
        assert not first.is_alive()
        assert time.monotonic() - start < 0.3 + 1.0
        assert server_threads(server.port) == []
        client.join(5)
        assert received in ([b""], [])  # closed without an answer (EOF or reset)
    finally:
        release.set()


def test_requests_queued_for_a_thread_when_the_stop_begins_get_503(serve):
    entered, release = threading.Event(), threading.Event()

    def handler(request: HttpRequest) -> HttpResponse:
        entered.set()
        release.wait(10)
        return echo(request)

    server = serve(handler, num_threads=1)
    replies = {}

    def send(name: str) -> None:
        replies[name] = exchange(server.port, f"GET /{name} HTTP/1.1\r\n\r\n".encode())

    first = threading.Thread(target=send, args=("first",))
    first.start()
    try:
        assert entered.wait(5)
        queued = threading.Thread(target=send, args=("queued",))
        queued.start()
        time.sleep(0.5)  # the queued request is read and waits for the only thread
        stopper = threading.Thread(target=server.stop, args=(3.0,))
        stopper.start()
        time.sleep(0.2)
    finally:
        release.set()
    for thread in (first, queued, stopper):
        thread.join(5)
    assert replies["first"].status == 200
    assert (replies["queued"].status, replies["queued"].error) == (503, "Server is shutting down")


def test_stop_returns_in_time_with_many_open_connections(serve):
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    n = min(1000, (soft - 200) // 2)  # each connection takes two descriptors in this process
    server = serve(read_timeout_seconds=30)
    socks = []
    try:
        for i in range(n):
            sock = connect(server.port)
            if i % 2:
                sock.sendall(b"POST / HTTP/1.1\r\nContent-Length: 10\r\n\r\nab")
            socks.append(sock)
        start = time.monotonic()
        server.stop(grace=0.5)
        assert time.monotonic() - start < 0.5 + 1.0
        assert server_threads(server.port) == []
        assert all(is_closed(sock, timeout=1) for sock in socks)
    finally:
        for sock in socks:
            sock.close()


def test_stop_is_idempotent_and_thread_safe(serve):
    server = serve()
    port = server.port
    stoppers = [threading.Thread(target=server.stop, args=(1.0,)) for _ in range(4)]
    start = time.monotonic()
    for thread in stoppers:
        thread.start()
    server.stop(1.0)
    for thread in stoppers:
        thread.join(3)
    assert time.monotonic() - start < 1.0
    assert not any(thread.is_alive() for thread in stoppers)
    server.stop()
    with pytest.raises(ConnectionRefusedError):
        connect(port).close()
    with pytest.raises(RuntimeError):
        server.start()


def test_stop_before_start_and_start_twice():
    server = HttpServer(echo, HOST, 0)
    server.stop()
    with pytest.raises(RuntimeError):
        server.start()
    started = HttpServer(echo, HOST, 0).start()
    try:
        with pytest.raises(RuntimeError):
            started.start()
    finally:
        started.stop(0)


def test_stop_during_start_up_leaves_nothing_running():
    for attempt in range(20):
        server = HttpServer(echo, HOST, 0)
        outcome = []

        def start(server=server, outcome=outcome) -> None:
            try:
                server.start()
                outcome.append("started")
            except RuntimeError:
                outcome.append("refused")

        starter = threading.Thread(target=start)
        starter.start()
        time.sleep(attempt * 0.0002)
        server.stop(0)
        starter.join(2)
        assert not starter.is_alive()
        assert outcome in (["started"], ["refused"])
        if server.port:
            assert server_threads(server.port) == []
            with pytest.raises(ConnectionRefusedError):
                connect(server.port).close()


def test_invalid_arguments_are_refused():
    with pytest.raises(ValueError, match="max_connections"):
        HttpServer(echo, HOST, 0, max_connections=0)
    with pytest.raises(ValueError, match="read_timeout_seconds"):
        HttpServer(echo, HOST, 0, read_timeout_seconds=-1.0)
