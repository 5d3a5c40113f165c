"""A small, bounded HTTP/1.0 and HTTP/1.1 server on asyncio (the REST API's transport).

One request per connection: an event loop on a background thread reads the whole request
(request line, headers, a `Content-Length` or chunked body), a pool of threads runs the handler
on it, and the loop writes the response with `Content-Length` and `Connection: close`, then
closes the connection. What a client can make the server hold is bounded:

- the whole request must arrive within `read_timeout_seconds` of the accept (a deadline per
  request, not per read): 408, or a silent close for a connection that sent nothing;
- a response must be taken by the client within `write_timeout_seconds`, or the connection is
  dropped;
- the request head is capped at `max_header_bytes` and 100 header lines (431), the body at
  `max_body_bytes` (413, decided from `Content-Length` before the body is read);
- at most `max_connections` connections are open; a new one beyond them gets 503 at once.

Malformed requests get 400, a `Transfer-Encoding` other than chunked 501, an HTTP version other
than 1.0 and 1.1 505; every error body is `{"error": "<message>"}` and the connection closes
(after dropping, for up to a second, what the client still sends, so that it reads the answer
rather than a reset). `Expect: 100-continue` is answered before the body is read, once its
declared length is within the cap. `stop(grace)` returns within `grace` plus about a second
whatever the clients do.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import enum
import functools
import http
import json
import logging
import queue
import re
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from email.utils import formatdate
from typing import Any

logger = logging.getLogger(__name__)

_MAX_HEADER_LINES = 100
_INTERNAL_ERROR = "Internal error"
_STOPPING = "Server is shutting down"
_TOO_MANY_CONNECTIONS = "Too many open connections"

_BACKLOG = socket.SOMAXCONN
_LINGER_SECONDS = 1.0  # how long an error answer waits for the rest of the request to drop
_LINGER_READ_BYTES = 2**16
_CLOSE_WAIT_SECONDS = 0.25  # for cancelled connection tasks to finish when the stop ends
_MIN_LINGERING_REFUSALS = 64  # refused connections that may linger (or max_connections)
_ACCEPT_RETRY_SECONDS = 0.5  # after accept() failed for want of descriptors or memory
_STOP_MARGIN_SECONDS = 0.9  # what stop() waits for the loop beyond grace
_JOIN_SECONDS = 0.1
_CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
_TOKEN = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_TARGET = re.compile(rb"[\x21-\x7e\x80-\xff]+")
_VERSION = re.compile(rb"HTTP/[0-9]\.[0-9]")
_BAD_VALUE = re.compile(rb"[\x00-\x08\x0a-\x1f\x7f]")
_DIGITS = re.compile(r"[0-9]+")
_CHUNK_SIZE = re.compile(rb"([0-9A-Fa-f]+)[ \t]*(?:;[^\x00-\x08\x0a-\x1f\x7f]*)?\r?\n")
_CONTENT_TYPE = re.compile(r"[\x20-\x7e]+")


class Headers(Mapping[str, str]):
    """Request header fields, looked up case-insensitively.

    Iteration gives each field name as first sent; a repeated field's values are joined with
    ", " (RFC 9110 section 5.3).

    Example:
        >>> headers = Headers([("Content-Type", "text/plain"), ("Accept", "a"), ("accept", "b")])
        >>> headers["content-type"], headers["ACCEPT"], list(headers)
        ('text/plain', 'a, b', ['Content-Type', 'Accept'])
    """

    def __init__(self, fields: Iterable[tuple[str, str]] = ()):
        self._fields: dict[str, tuple[str, str]] = {}
        for name, value in fields:
            key = name.lower()
            if key in self._fields:
                first_name, previous = self._fields[key]
                self._fields[key] = (first_name, f"{previous}, {value}")
            else:
                self._fields[key] = (name, value)

    def __getitem__(self, name: str) -> str:
        if not isinstance(name, str):
            raise KeyError(name)
        return self._fields[name.lower()][1]

    def __iter__(self) -> Iterator[str]:
        return (name for name, _ in self._fields.values())

    def __len__(self) -> int:
        return len(self._fields)

    def __repr__(self) -> str:
        return f"Headers({list(self._fields.values())!r})"


@dataclasses.dataclass(frozen=True)
class HttpRequest:
    """One complete HTTP request, as the handler gets it.

    Attributes:
        method: the method token as sent (`"GET"`, `"POST"`, ...).
        target: the request target as sent, e.g. `"/v1/models/x:predict?a=b"`.
        headers: the header fields (case-insensitive lookups).
        body: the whole body (`Content-Length` or chunked, decoded).
    """

    method: str
    target: str
    headers: Mapping[str, str]
    body: bytes


@dataclasses.dataclass(frozen=True)
class HttpResponse:
    """What the handler answers: a status (200-599), a body, its content type and any other
    header fields, as (name, value) pairs."""

    status: int
    body: bytes
    content_type: str = "application/json"
    headers: tuple[tuple[str, str], ...] = ()


class _HttpError(Exception):
    """A request the server answers itself with `status` and `{"error": message}`."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


class _Phase(enum.Enum):
    READING = "reading"  # the request is arriving
    HANDLING = "handling"  # the handler is running (or queued for a thread)
    WRITING = "writing"  # the handler's response is being written
    CLOSING = "closing"  # an error answer is being written, or the connection lingers


@dataclasses.dataclass(eq=False)
class _Connection:
    sock: socket.socket
    accepted: float  # the loop's time at the accept
    task: asyncio.Task[None] | None = None
    transport: asyncio.Transport | None = None  # once the task has made it
    phase: _Phase = _Phase.READING
    received: bool = False  # whether any byte of a request arrived

    def close(self) -> None:
        """Closes the connection at once (a no-op after a graceful close)."""
        if self.transport is not None:
            self.transport.abort()
        else:
            self.sock.close()


def _encode_response(
    status: int,
    body: bytes,
    content_type: str,
    *,
    head_only: bool = False,
    headers: Iterable[tuple[str, str]] = (),
) -> bytes:
    """The bytes of a `Connection: close` response (the body left out when `head_only`).

    Raises:
        ValueError: a status outside 200-599, a content type or header value with control
            characters, or a header name that is not a token.
    """
    if isinstance(status, bool) or not isinstance(status, int) or not 200 <= status <= 599:
        raise ValueError(f"Expected an HTTP status in 200-599. Received: status={status!r}")
    if not _CONTENT_TYPE.fullmatch(content_type):
        raise ValueError(f"Expected a printable content type. Received: {content_type!r}")
    extra = ""
    for name, value in headers:
        if not _TOKEN.fullmatch(name.encode("latin-1")) or not _CONTENT_TYPE.fullmatch(value):
            raise ValueError(f"Expected a token and a printable value. Received: {name!r}")
        extra += f"{name}: {value}\r\n"
    body = bytes(body)
    try:
        reason = http.HTTPStatus(status).phrase
    except ValueError:
        reason = ""
    head = (
        f"HTTP/1.1 {status} {reason}\r\n"
        f"Date: {formatdate(usegmt=True)}\r\n"
        f"Content-Type: {content_type}\r\n"
        f"Content-Length: {len(body)}\r\n"
        f"{extra}"
        "Connection: close\r\n\r\n"
    ).encode("latin-1")
    return head if head_only else head + body


def _error_response(status: int, message: str) -> bytes:
    """A JSON error response, `{"error": message}`."""
    body = json.dumps({"error": message}).encode("utf-8")
    return _encode_response(status, body, "application/json")


class _HandlerThreads(concurrent.futures.Executor):
    """Up to `max_workers` daemon threads running submitted calls.

    Unlike `ThreadPoolExecutor`'s, these threads do not hold up interpreter exit: a handler
    still blocked when the server has stopped is left to finish on its own.
    """

    def __init__(self, max_workers: int, name: str):
        self._max_workers = max_workers
        self._name = name
        self._work: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._idle = threading.Semaphore(0)
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._shut_down = False

    def submit(
        self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any
    ) -> concurrent.futures.Future:
        future: concurrent.futures.Future = concurrent.futures.Future()
        with self._lock:
            if self._shut_down:
                raise RuntimeError("cannot schedule new calls after shutdown")
            self._work.put((future, fn, args, kwargs))
            if not self._idle.acquire(blocking=False) and len(self._threads) < self._max_workers:
                thread = threading.Thread(
                    target=self._run, name=f"{self._name}-{len(self._threads)}", daemon=True
                )
                self._threads.append(thread)
                thread.start()
        return future

    def _run(self) -> None:
        while (item := self._work.get()) is not None:
            future, fn, args, kwargs = item
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(fn(*args, **kwargs))
                except BaseException as error:  # handed to the caller, as ThreadPoolExecutor does
                    future.set_exception(error)
            del item, future, fn, args, kwargs  # no request or response is kept while idle
            self._idle.release()

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._lock:
            self._shut_down = True
            threads = list(self._threads)
        if cancel_futures:
            with contextlib.suppress(queue.Empty):
                while True:
                    self._work.get_nowait()[0].cancel()
        for _ in threads:
            self._work.put(None)
        if wait:
            for thread in threads:
                thread.join()


class _HeadReader:
    """Reads the lines of a request head (and chunked trailers) within the header caps."""

    def __init__(self, reader: asyncio.StreamReader, max_bytes: int):
        self._reader = reader
        self._max_bytes = max_bytes
        self._bytes = 0
        self.fields = 0

    def _too_large(self) -> _HttpError:
        return _HttpError(
            431, f"Request headers larger than the server's limit of {self._max_bytes} bytes"
        )

    async def line(self, start: bytes = b"") -> bytes:
        """The next line without its CRLF (or LF); `start` is its first byte, already read.

        Raises:
            _HttpError: 431 once the head is over `max_bytes`.
            asyncio.IncompleteReadError: the client closed mid-line.
        """
        raw = start
        if not raw.endswith(b"\n"):
            try:
                raw += await self._reader.readuntil(b"\n")
            except asyncio.LimitOverrunError:
                raise self._too_large() from None
        self._bytes += len(raw)
        if self._bytes > self._max_bytes:
            raise self._too_large()
        return raw[:-1].removesuffix(b"\r")

    async def field(self) -> tuple[str, str] | None:
        """The next header (or trailer) field as (name, value); None at the empty line."""
        raw = await self.line()
        if not raw:
            return None
        self.fields += 1
        if self.fields > _MAX_HEADER_LINES:
            raise _HttpError(431, f"More than {_MAX_HEADER_LINES} request header lines")
        name, colon, value = raw.partition(b":")
        value = value.strip(b" \t")
        if not colon or not _TOKEN.fullmatch(name) or _BAD_VALUE.search(value):
            raise _HttpError(400, "Malformed header line")
        return name.decode("ascii"), value.decode("latin-1")


class HttpServer:
    """A bounded HTTP/1.x server: one request per connection, the handler on a thread pool.

    Args:
        handler: answers each complete request (blocking; it may take seconds). An exception
            is logged and answered 500 `{"error": "Internal error"}`.
        host: the address to bind (an IPv6 address such as `"::1"` binds IPv6).
        port: the port to bind (0: a free port, see `port`).
        num_threads: threads running the handler.
        max_connections: open connections; a new one beyond them is answered 503 at once.
        read_timeout_seconds: the whole request must arrive within this time of the accept.
        write_timeout_seconds: the client must take the response within this time.
        max_body_bytes: the largest body (413 beyond it).
        max_header_bytes: the largest request head, request line included (431 beyond it).

    Raises:
        ValueError: a count or size that is not positive.

    Example:
        >>> import http.client
        >>> server = HttpServer(lambda r: HttpResponse(200, r.body), "127.0.0.1", 0).start()
        >>> connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
        >>> connection.request("POST", "/echo", body=b'{"x": 1}')
        >>> response = connection.getresponse()
        >>> response.status, response.getheader("Connection"), response.read()
        (200, 'close', b'{"x": 1}')
        >>> server.stop()
    """

    def __init__(
        self,
        handler: Callable[[HttpRequest], HttpResponse],
        host: str,
        port: int,
        *,
        num_threads: int = 16,
        max_connections: int = 1024,
        read_timeout_seconds: float = 10.0,
        write_timeout_seconds: float = 10.0,
        max_body_bytes: int = 64 * 2**20,
        max_header_bytes: int = 64 * 2**10,
    ):
        for name, value in (
            ("num_threads", num_threads),
            ("max_connections", max_connections),
            ("read_timeout_seconds", read_timeout_seconds),
            ("write_timeout_seconds", write_timeout_seconds),
            ("max_body_bytes", max_body_bytes),
            ("max_header_bytes", max_header_bytes),
        ):
            if isinstance(value, bool) or not value > 0:
                raise ValueError(f"Expected {name} to be positive. Received: {name}={value!r}")
        self._handler = handler
        self._host = host
        self._port = port
        self._num_threads = num_threads
        self._max_connections = max_connections
        self._read_timeout = read_timeout_seconds
        self._write_timeout = write_timeout_seconds
        self._max_body_bytes = max_body_bytes
        self._max_header_bytes = max_header_bytes
        # Shared with the caller's threads (under _lock).
        self._lock = threading.RLock()
        self._started = False
        self._stop_requested = threading.Event()
        self._stop_deadline: float | None = None  # time.monotonic(); None: no limit
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._finished = threading.Event()
        # The event loop's own.
        self._listener: socket.socket | None = None
        self._pool: _HandlerThreads | None = None
        self._connections: set[_Connection] = set()
        self._admitted = 0
        self._refused = 0  # refused connections lingering
        self._stopping = asyncio.Event()
        self._changed = asyncio.Event()

    @property
    def port(self) -> int:
        """The bound port once started (the requested one before)."""
        return self._port

    def start(self) -> HttpServer:
        """Binds host:port and serves on a background thread; returns the server.

        Raises:
            OSError: the address cannot be bound (nothing is left running).
            RuntimeError: the server was already started or stopped.
        """
        with self._lock:
            if self._started or self._stop_requested.is_set():
                raise RuntimeError("An HttpServer can be started once, and not after stop()")
            self._started = True
        try:
            listener = self._bind()
        except OSError:
            self._finished.set()
            raise
        self._listener = listener
        self._port = listener.getsockname()[1]
        self._pool = _HandlerThreads(self._num_threads, f"http-handler-{self._port}")
        loop = asyncio.SelectorEventLoop()
        loop.add_reader(listener.fileno(), self._accept)  # served once the thread runs the loop
        thread = threading.Thread(target=self._run, args=(loop,), name=f"http-server-{self._port}")
        thread.daemon = True
        with self._lock:
            stopped = self._stop_requested.is_set()
            if not stopped:
                self._loop, self._thread = loop, thread
        if stopped:  # stop() came while binding
            loop.remove_reader(listener.fileno())
            loop.close()
            listener.close()
            self._finished.set()
            return self
        thread.start()
        return self

    def stop(self, grace: float | None = 10.0) -> None:
        """Stops serving; returns within `grace` plus about a second whatever the clients do.

        New connections are refused at once (the port is released), and connections that are
        idle or still sending their request are closed. Requests whose handler is running may
        finish for `grace` seconds and get their responses; requests still waiting for a
        handler thread get 503. Then every remaining connection is closed (a handler still
        running finishes on its thread, its response dropped). Thread-safe and idempotent; a
        later call with a shorter `grace` shortens the wait.

        Args:
            grace: seconds running requests may take (None: no limit).
        """
        deadline = None if grace is None else time.monotonic() + max(grace, 0.0)
        with self._lock:
            if not self._stop_requested.is_set():
                self._stop_deadline = deadline
            elif deadline is not None and (
                self._stop_deadline is None or deadline < self._stop_deadline
            ):
                self._stop_deadline = deadline
            self._stop_requested.set()
            started, loop, thread = self._started, self._loop, self._thread
        if not started:
            return
        if loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop has already closed
                loop.call_soon_threadsafe(self._begin_stop)
        wait = None if grace is None else max(grace, 0.0) + _STOP_MARGIN_SECONDS
        if self._finished.wait(wait) and thread not in (None, threading.current_thread()):
            thread.join(_JOIN_SECONDS)  # it ends right after setting _finished

    # ------------------------------------------------------------------ the loop thread

    def _bind(self) -> socket.socket:
        family = socket.AF_INET6 if ":" in self._host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self._host, self._port))
            sock.listen(_BACKLOG)
            sock.setblocking(False)
        except BaseException:
            sock.close()
            raise
        return sock

    def _run(self, loop: asyncio.AbstractEventLoop) -> None:
        try:
            loop.run_until_complete(self._main())
        except Exception:
            logger.exception("HTTP server failed")
        finally:
            self._stop_accepting(loop)
            self._pool.shutdown(wait=False, cancel_futures=True)
            loop.close()
            self._finished.set()

    def _stop_accepting(self, loop: asyncio.AbstractEventLoop) -> None:
        """Closes the listening socket (the port is released here)."""
        if self._listener.fileno() != -1:
            loop.remove_reader(self._listener.fileno())
            self._listener.close()

    def _begin_stop(self) -> None:
        """Stops accepting and closes the connections still reading (on the loop)."""
        if not self._stopping.is_set():
            self._stopping.set()
            self._stop_accepting(asyncio.get_running_loop())
            for connection in self._connections:
                if connection.phase not in (_Phase.HANDLING, _Phase.WRITING):
                    connection.task.cancel()
        self._changed.set()  # the deadline may have moved

    async def _main(self) -> None:
        """Serves until a stop, then waits for the requests in flight until the deadline."""
        try:
            await self._stopping.wait()
            while self._connections:
                deadline = self._stop_deadline
                timeout = None if deadline is None else deadline - time.monotonic()
                if timeout is not None and timeout <= 0:
                    break
                self._changed.clear()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(timeout):
                        await self._changed.wait()
        finally:
            tasks = [connection.task for connection in self._connections]
            for task in tasks:
                task.cancel()
            if tasks:
                await asyncio.wait(tasks, timeout=_CLOSE_WAIT_SECONDS)
            for connection in self._connections:  # tasks that did not end in time
                connection.close()
            await asyncio.sleep(0)  # the aborted transports close their sockets

    def _accept(self) -> None:
        """Accepts the waiting connections (the listening socket's reader callback)."""
        loop = asyncio.get_running_loop()
        for _ in range(_BACKLOG):
            try:
                sock, _ = self._listener.accept()
            except (BlockingIOError, InterruptedError, ConnectionAbortedError):
                return
            except OSError as error:  # out of descriptors or memory: pause accepting
                logger.warning("HTTP server cannot accept connections: %s", error.strerror)
                loop.remove_reader(self._listener.fileno())
                loop.call_later(_ACCEPT_RETRY_SECONDS, self._resume_accepting)
                return
            connection = _Connection(sock, loop.time())
            self._connections.add(connection)
            connection.task = loop.create_task(self._serve(connection))
            connection.task.add_done_callback(functools.partial(self._forget, connection))

    def _resume_accepting(self) -> None:
        if not self._stopping.is_set():
            asyncio.get_running_loop().add_reader(self._listener.fileno(), self._accept)

    def _forget(self, connection: _Connection, task: asyncio.Task[None]) -> None:
        """Drops a connection whose task has ended (closing it if cancelled before it ran)."""
        connection.close()
        self._connections.discard(connection)
        self._changed.set()

    async def _serve(self, connection: _Connection) -> None:
        """Answers one connection, then closes it."""
        try:
            reader, writer = await asyncio.open_connection(
                sock=connection.sock, limit=self._max_header_bytes
            )
            transport = connection.transport = writer.transport
            transport.set_write_buffer_limits(high=0)  # drain() waits for the whole response
            if self._admitted >= self._max_connections:
                connection.phase = _Phase.CLOSING
                await self._send(writer, _error_response(503, _TOO_MANY_CONNECTIONS))
                if self._refused < max(self._max_connections, _MIN_LINGERING_REFUSALS):
                    self._refused += 1
                    try:
                        await self._linger(reader, transport)
                    finally:
                        self._refused -= 1
                return
            self._admitted += 1
            try:
                await self._answer(connection, reader, writer)
            finally:
                self._admitted -= 1
        except (ConnectionError, TimeoutError):  # the client left, or stopped reading
            pass
        except Exception:
            logger.exception("HTTP connection failed")
        finally:
            connection.close()

    async def _answer(
        self, connection: _Connection, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout_at(connection.accepted + self._read_timeout):
                request = await self._read_request(connection, reader, writer)
        except (asyncio.IncompleteReadError, ConnectionError):
            return  # the client closed before its request was complete
        except TimeoutError:
            if not connection.received:
                return  # an idle connection is closed without an answer
            error = _HttpError(408, f"Request not complete within {self._read_timeout:g} s")
        except _HttpError as raised:
            error = raised
        else:
            if request is None:
                return
            connection.phase = _Phase.HANDLING
            data = await loop.run_in_executor(self._pool, self._respond, request)
            connection.phase = _Phase.WRITING
            await self._send(writer, data)
            writer.transport.close()
            return
        connection.phase = _Phase.CLOSING
        logger.debug(
            "HTTP %d to %s: %s", error.status, writer.get_extra_info("peername"), error.message
        )
        await self._send(writer, _error_response(error.status, error.message))
        await self._linger(reader, writer.transport)

    async def _read_request(
        self, connection: _Connection, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> HttpRequest | None:
        """The whole request; None when the client closes before sending anything.

        Raises:
            _HttpError: a request the server answers itself.
            asyncio.IncompleteReadError: the client closed mid-request.
        """
        first = await reader.read(1)
        if not first:
            return None
        connection.received = True
        head = _HeadReader(reader, self._max_header_bytes)
        line = await head.line(first)
        while not line:  # empty lines before the request line are ignored (RFC 9112 2.2)
            line = await head.line()
        parts = line.split(b" ")
        if (
            len(parts) != 3
            or not _TOKEN.fullmatch(parts[0])
            or not _TARGET.fullmatch(parts[1])
            or not _VERSION.fullmatch(parts[2])
        ):
            raise _HttpError(400, "Malformed request line")
        method, target, version = (part.decode("latin-1") for part in parts)
        if version not in ("HTTP/1.0", "HTTP/1.1"):
            raise _HttpError(505, "HTTP version not supported (HTTP/1.0 and HTTP/1.1 are)")
        fields = []
        while (field := await head.field()) is not None:
            fields.append(field)
        headers = Headers(fields)
        chunked = self._framing(version, headers)
        length = 0 if chunked else self._content_length(headers)
        expects_continue = headers.get("Expect", "").lower() == "100-continue"
        if expects_continue and version == "HTTP/1.1" and (chunked or length):
            writer.write(_CONTINUE)
            await writer.drain()
        if chunked:
            body = await self._read_chunked(reader, head)
        else:
            body = await reader.readexactly(length) if length else b""
        return HttpRequest(method, target, headers, body)

    def _framing(self, version: str, headers: Headers) -> bool:
        """Whether the body is chunked (else it has a Content-Length, or none)."""
        encoding = headers.get("Transfer-Encoding")
        if encoding is None:
            return False
        if version == "HTTP/1.0":
            raise _HttpError(400, "Transfer-Encoding in an HTTP/1.0 request")
        if "Content-Length" in headers:
            raise _HttpError(400, "Both Content-Length and Transfer-Encoding headers")
        if [coding.strip() for coding in encoding.lower().split(",")] != ["chunked"]:
            raise _HttpError(501, "Transfer-Encoding not implemented (only chunked is)")
        return True

    def _content_length(self, headers: Headers) -> int:
        """The declared body length (0 without the header), within `max_body_bytes`."""
        values = [value.strip() for value in headers.get("Content-Length", "0").split(",")]
        if not all(_DIGITS.fullmatch(value) for value in values):
            raise _HttpError(400, "Invalid Content-Length header")
        digits = {value.lstrip("0") or "0" for value in values}
        if len(digits) > 1:
            raise _HttpError(400, "Conflicting Content-Length headers")
        (value,) = digits
        if len(value) > len(str(self._max_body_bytes)) or int(value) > self._max_body_bytes:
            raise self._body_too_large()
        return int(value)

    def _body_too_large(self) -> _HttpError:
        return _HttpError(
            413, f"Request body larger than the server's limit of {self._max_body_bytes} bytes"
        )

    async def _read_chunked(self, reader: asyncio.StreamReader, head: _HeadReader) -> bytes:
        """A chunked body, decoded (chunk extensions and trailers dropped)."""
        malformed = _HttpError(400, "Malformed chunked body")
        body = bytearray()
        while True:
            try:
                size_line = await reader.readuntil(b"\n")
            except asyncio.LimitOverrunError:
                raise malformed from None
            match = _CHUNK_SIZE.fullmatch(size_line)
            if match is None:
                raise malformed
            digits = match.group(1).lstrip(b"0")
            room = self._max_body_bytes - len(body)
            if len(digits) > len(f"{room:x}") or int(digits or b"0", 16) > room:
                raise self._body_too_large()
            size = int(digits or b"0", 16)
            if size == 0:
                break
            body += await reader.readexactly(size)
            if await reader.readexactly(2) != b"\r\n":
                raise malformed
        while await head.field() is not None:  # trailers, within the header caps
            pass
        return bytes(body)

    def _respond(self, request: HttpRequest) -> bytes:
        """The response bytes to a request (on a handler thread)."""
        if self._stop_requested.is_set():
            return _error_response(503, _STOPPING)
        try:
            response = self._handler(request)
            return _encode_response(
                response.status,
                response.body,
                response.content_type,
                head_only=request.method == "HEAD",
                headers=response.headers,
            )
        except Exception:
            logger.exception("HTTP handler failed on %s %.200s", request.method, request.target)
            return _error_response(500, _INTERNAL_ERROR)

    async def _send(self, writer: asyncio.StreamWriter, data: bytes) -> None:
        """Writes `data`, handed to the kernel within the write timeout.

        Raises:
            TimeoutError: the client did not take it in time.
            ConnectionError: the client went away.
        """
        async with asyncio.timeout(self._write_timeout):
            writer.write(data)
            await writer.drain()

    async def _linger(self, reader: asyncio.StreamReader, transport: asyncio.BaseTransport) -> None:
        """Half-closes, then drops what the client still sends for a while.

        Closing a socket with unread input resets the connection, which can destroy the answer
        before the client reads it; lingering lets a client that is still sending its request
        read the error first.
        """
        if transport.can_write_eof():
            transport.write_eof()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(_LINGER_SECONDS):
                while await reader.read(_LINGER_READ_BYTES):
                    pass
