"""The admin transport (transport/http_pool.py, libcurl) against real local socket servers that answer with raw bytes:
each framing an answer may use, each way an answer can be broken or hostile (ambiguous framing, endless or
trickling answers, other protocols), and what the tool promises about them: one sentence, exit 4, a connection
never reused after a refused answer, a deadline for the whole exchange, bounded memory."""

from __future__ import annotations

import os
import resource
import socket
import threading
import time

import pytest

from pulsar_txn_cli.transport import http_pool
from pulsar_txn_cli.errors import ConnectionFailed
from tests.admin.conftest import Sleeps, rest_admin
from tests.conftest import assert_no_crash


def ok(body: bytes, *extra: str) -> bytes:
    head = ["HTTP/1.1 200 OK", "Content-Type: application/json", f"Content-Length: {len(body)}", *extra]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


class RawServer:
    """Answers the n-th request with answers[n] (the last one repeated), raw bytes as given. Records each request's
    bytes and the connection it came on; an answer ending in CLOSE closes the connection after it is sent."""

    CLOSE = b"<close>"

    def __init__(self, *answers: bytes):
        self.answers = list(answers)
        self.requests: list[tuple[int, bytes]] = []
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.connections = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._serve, args=(conn, self.connections), daemon=True).start()

    def _serve(self, conn: socket.socket, number: int) -> None:
        try:
            self._answer(conn, number)
        except OSError:  # the client closed first (it refused an answer): nothing more to say
            conn.close()

    def _answer(self, conn: socket.socket, number: int) -> None:
        buffer = b""
        with conn:
            while True:
                while b"\r\n\r\n" not in buffer:
                    data = conn.recv(65536)
                    if not data:
                        return
                    buffer += data
                head, _, buffer = buffer.partition(b"\r\n\r\n")
                length = next(
                    (
                        int(line.split(b":")[1])
                        for line in head.split(b"\r\n")
                        if line.lower().startswith(b"content-length")
                    ),
                    0,
                )
                while len(buffer) < length:  # the body, in as many segments as it comes
                    data = conn.recv(65536)
                    if not data:
                        return
                    buffer += data
                self.requests.append((number, head + b"\r\n\r\n" + buffer[:length]))
                buffer = buffer[length:]
                answer = self.answers[min(len(self.requests) - 1, len(self.answers) - 1)]
                close = answer.endswith(self.CLOSE)
                conn.sendall(answer.removesuffix(self.CLOSE))
                if close:
                    return

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.sock.close()


def admin_at(server: RawServer, **kw):
    return rest_admin(server.url, retries=0, sleeps=Sleeps(), timeout=2.0, **kw)


def test_a_chunked_answer_with_extensions_and_trailers_is_read_and_the_connection_kept():
    body = b'["public","pulsar"]'
    chunks = b"".join(
        b"%x%s\r\n%s\r\n" % (len(p), b";name=x" if i == 0 else b"", p)
        for i, p in enumerate((body[:4], body[4:15], body[15:]))
    )
    chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunks + b"0\r\nX-Trailer: yes\r\n\r\n"
    with RawServer(chunked) as server:
        admin = admin_at(server)
        assert admin.tenants() == ["public", "pulsar"]
        assert admin.tenants() == ["public", "pulsar"]
    assert [number for number, _ in server.requests] == [1, 1]


@pytest.mark.parametrize(
    "answers",
    [
        (b'HTTP/1.1 200 OK\r\n\r\n["public"]' + RawServer.CLOSE,),
        (ok(b'["public"]', "Connection: close"),),
        (ok(b'["public"]').replace(b"HTTP/1.1", b"HTTP/1.0", 1),),
        (ok(b'["public"]') + b"garbage", ok(b'["public"]')),
    ],
    ids=["framed-by-the-close", "connection-close", "http-1.0", "bytes-left-after-it"],
)
def test_an_answer_that_ends_its_connection_is_read_whole_and_the_next_goes_on_a_new_one(answers):
    with RawServer(*answers) as server:
        admin = admin_at(server)
        assert admin.tenants() == ["public"]
        assert admin.tenants() == ["public"]
    assert [number for number, _ in server.requests] == [1, 2]


def test_an_informational_answer_before_the_real_one_is_skipped():
    with RawServer(b"HTTP/1.1 100 Continue\r\n\r\n" + ok(b'["public"]')) as server:
        assert admin_at(server).tenants() == ["public"]


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        (b"HTTP/1.1 2xx OK\r\n\r\n", "with malformed HTTP"),
        (b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", "with malformed HTTP"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: many\r\n\r\n", "with malformed HTTP"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n[1, 2" + RawServer.CLOSE, "dropped the connection during"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n" + RawServer.CLOSE, "dropped the connection"),
        (b"HTTP/1.1 200 OK\r\nX-Long: " + b"a" * (http_pool.MAX_HEAD + 10) + b"\r\n\r\n", "refused as too large"),
        (b"" + RawServer.CLOSE, "dropped the connection during"),
    ],
    ids=["bad-status", "bad-header", "bad-length", "truncated", "bad-chunk", "huge-head", "no-answer"],
)
def test_a_broken_answer_is_one_sentence_and_its_connection_closed(answer, said):
    with RawServer(answer, ok(b'["public"]')) as server:
        admin = admin_at(server)
        with pytest.raises(ConnectionFailed, match=said) as info:
            admin.tenants()
        assert "GET /admin/v2/tenants" in str(info.value) and "\n" not in str(info.value)
        assert admin.tenants() == ["public"]  # the next exchange on a connection of its own
    assert [number for number, _ in server.requests] == [1, 2]


# --- framing that could desync a kept-alive connection: refused, never reused -----------------------------------

FORGED = b'{"9":{"state":"Forged"}}'


@pytest.mark.parametrize(
    ("head", "said"),
    [
        ("Content-Length: 2\r\nContent-Length: 70", "Invalid Content-Length"),
        ("Content-Length: 2, 70", "Invalid Content-Length"),
        ("Content-Length: +2", "Invalid Content-Length"),
        ("Content-Length: 1_0", "Invalid Content-Length"),
        ("Transfer-Encoding: chunked\r\nContent-Length: 2", "both Transfer-Encoding and Content-Length"),
        ("Transfer-Encoding: xchunkedx", "Transfer-Encoding"),
        ("Transfer-Encoding: gzip, chunked", "Transfer-Encoding"),
        ("Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked", "only 'chunked' is accepted"),
    ],
    ids=[
        "two-lengths",
        "length-list",
        "plus-sign",
        "underscore",
        "te-and-cl",
        "unknown-coding",
        "gzip-chunked",
        "twice",
    ],
)
def test_ambiguous_framing_is_refused_and_the_rest_never_becomes_the_next_answer(head, said):
    """The bytes after the first framing's end (a forged answer) would be read as the next request's answer on a
    kept-alive connection: the answer is refused at its headers, and the connection closed with it."""
    body = b"2\r\n[]\r\n0\r\n\r\n" if "chunked" in head else b"[]"
    forged = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(FORGED), FORGED)
    answer = b"HTTP/1.1 200 OK\r\n" + head.encode() + b"\r\n\r\n" + body + forged
    with RawServer(answer, ok(b'["public"]')) as server:
        admin = admin_at(server)
        with pytest.raises(ConnectionFailed) as info:
            admin.tenants()
        message = str(info.value)
        assert "answered GET /admin/v2/tenants with malformed HTTP" in message and said in message
        assert "the answer was refused and its connection closed" in message
        assert admin.tenants() == ["public"]
    assert [number for number, _ in server.requests] == [1, 2]


def test_a_desync_through_the_cli_is_exit_4_and_one_sentence(cli):
    answer = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 70\r\n\r\n[]" + ok(FORGED)
    with RawServer(answer) as server:
        result = cli(["coordinators-list", "--admin-url", server.url, "--request-timeout", "2"])
    assert result.exit_code == 4, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("error")]
    assert len(lines) == 1 and "malformed HTTP (Invalid Content-Length" in lines[0]
    assert "Forged" not in result.stdout + result.stderr
    assert_no_crash(result)


# --- bounds: a whole-exchange deadline, a size cap, no file-descriptor ceiling --------------------------------------


class Trickle(RawServer):
    """Answers with a head announcing a body it then sends one byte every `every` seconds (a slow-loris answer)."""

    def __init__(self, every: float, length: int = 1000):
        self.every, self.length = every, length
        super().__init__(b"")

    def _serve(self, conn, number):
        with conn:
            conn.recv(65536)
            self.requests.append((number, b""))
            try:
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % self.length)
                for _ in range(self.length):
                    conn.sendall(b" ")
                    time.sleep(self.every)
            except OSError:
                return


def test_a_trickling_answer_ends_at_the_request_timeout():
    """--request-timeout bounds the whole exchange, not each read: an answer that keeps moving still ends at S."""
    with Trickle(every=0.05) as server:
        started = time.monotonic()
        with pytest.raises(ConnectionFailed, match="got no answer within 1s") as info:
            rest_admin(server.url, retries=3, timeout=1.0).tenants()
        elapsed = time.monotonic() - started
    assert 0.9 < elapsed < 2.0, elapsed
    assert "raise --request-timeout" in str(info.value)
    assert len(server.requests) == 1  # a timeout after the request left is not retried


class Endless(RawServer):
    """An answer that never ends: a chunked body (or a stream of headers) written as fast as the client reads."""

    def __init__(self, head: bytes, piece: bytes):
        self.head, self.piece = head, piece
        super().__init__(b"")

    def _serve(self, conn, number):
        with conn:
            conn.recv(65536)
            self.requests.append((number, b""))
            try:
                conn.sendall(self.head)
                while True:
                    conn.sendall(self.piece)
            except OSError:
                return


def test_an_endless_body_is_refused_at_the_cap_with_memory_flat(monkeypatch):
    chunk = b"x" * 65536
    piece = b"%x\r\n%s\r\n" % (len(chunk), chunk)
    with Endless(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", piece) as server:
        admin = rest_admin(server.url, retries=3, timeout=20.0)
        admin.transport.pool.max_body = 8 * 1024 * 1024
        before = _rss()
        for _ in range(5):  # each one ends at the cap and its memory is given back
            with pytest.raises(ConnectionFailed, match=r"was refused as too large \(its body passed 8 MiB\)"):
                admin.tenants()
        grown = _rss() - before
    assert len(server.requests) == 5  # not retried
    assert grown < 64 * 1024 * 1024, grown


def test_an_announced_length_past_the_cap_is_refused_before_its_body_is_read():
    head = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % (http_pool.MAX_BODY + 1)
    with RawServer(head + b"[]") as server:
        with pytest.raises(ConnectionFailed, match=r"refused as too large \(its body passed 256 MiB\)"):
            admin_at(server).tenants()


@pytest.mark.parametrize(
    "head, piece",
    [
        (b"HTTP/1.1 200 OK\r\n", b"X-More: " + b"a" * 1000 + b"\r\n"),
        (b"", b"HTTP/1.1 100 Continue\r\n\r\n"),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n[]\r\n0\r\n",
            b"X-Trailer: " + b"a" * 500 + b"\r\n",
        ),
    ],
    ids=["headers", "informational-answers", "trailers"],
)
def test_endless_headers_informational_answers_or_trailers_are_bounded(head, piece):
    with Endless(head, piece) as server:
        with pytest.raises(ConnectionFailed, match=r"refused as too large \(its headers passed 300 KiB\)"):
            rest_admin(server.url, retries=0, timeout=10.0).tenants()


def test_sockets_above_file_descriptor_1024_work():
    """select() cannot watch a descriptor above 1023; libcurl polls."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert hard >= 1200, f"the test needs 1200 file descriptors (hard limit {hard})"
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1200), hard))
    held = []
    try:
        while not held or held[-1] < 1100:
            held.append(os.open(os.devnull, os.O_RDONLY))
        with RawServer(ok(b'["public"]')) as server:
            admin = admin_at(server)
            assert admin.tenants() == ["public"] and admin.tenants() == ["public"]
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def _rss() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_the_request_is_one_well_formed_message():
    with RawServer(ok(b""), ok(b'{"a": 1}')) as server:
        admin = admin_at(server)
        admin.update_dynamic_config("transactionLogBatchedWriteEnabled", True)  # a POST without a body
        admin.call("PUT", "/admin/v2/x", body={"a": 1})
    post, put = (raw.decode() for _, raw in server.requests)
    port = server.url.rsplit(":", 1)[1]
    assert post.startswith("POST /admin/v2/brokers/configuration/transactionLogBatchedWriteEnabled/true HTTP/1.1\r\n")
    assert f"\r\nHost: 127.0.0.1:{port}\r\n" in post and "\r\nContent-Length: 0\r\n" in post
    assert put.endswith('\r\nContent-Length: 7\r\n\r\n{"a":1}') and "Content-Type: application/json" in put


def test_a_header_value_with_a_line_break_is_refused_before_anything_is_sent():
    with RawServer(ok(b"[]")) as server:
        with pytest.raises(ConnectionFailed, match="Authorization header holds a line break"):
            rest_admin(server.url, token="abc\r\nX-Injected: 1", retries=0).tenants()
    assert server.requests == []


def test_headers_are_read_whatever_their_case():
    answer = b"HTTP/1.1 307 Temporary Redirect\r\nLOCATION: /admin/v2/tenants?x=1\r\ncontent-length: 0\r\n\r\n"
    with RawServer(answer, ok(b'["public"]')) as server:
        assert admin_at(server).tenants() == ["public"]
    assert server.requests[1][1].startswith(b"GET /admin/v2/tenants?x=1 HTTP/1.1")


@pytest.mark.parametrize(
    "answer", [b"SSH-2.0-OpenSSH_9.6\r\n" + RawServer.CLOSE, b"\x00\x00\x00\x05\x08\x12"], ids=["ssh", "binary"]
)
def test_another_protocols_port_is_named_at_once_and_not_retried(answer):
    """A URL with the wrong port (an SSH server's, a binary protocol's that waits for more) is one sentence that
    says so, at the first bytes, without waiting for the timeout and without the retries a dropped connection gets."""
    with RawServer(answer) as server:
        with pytest.raises(ConnectionFailed) as info:
            rest_admin(server.url, retries=3, timeout=30.0).tenants()
    message = str(info.value)
    assert "answered GET /admin/v2/tenants in something that is not HTTP (it began b'" in message
    assert "the broker's web service port (e.g. http://broker:8080)" in message
    assert len(server.requests) == 1


def test_a_tls_port_asked_in_plain_http_says_the_url_wants_https():
    with RawServer(b"\x15\x03\x03\x00\x02\x02\x46" + RawServer.CLOSE) as server:
        with pytest.raises(ConnectionFailed, match=r"not HTTP \(it answered in TLS: the URL wants https://\)"):
            rest_admin(server.url, retries=3).tenants()
    assert len(server.requests) == 1


def test_a_timeout_on_a_kept_alive_connection_is_a_read_timeout_and_not_sent_again():
    """The request left on a connection already open (no connect of its own): the server has it, so the timeout is
    final, never retried as a connect timeout would be."""
    from tests.admin.scripted import ScriptedServer, json_answer

    answers = iter([json_answer(["public"]), ("sleep", 2.0, json_answer(["public"]))])
    with ScriptedServer(lambda request: next(answers)) as server:
        admin = rest_admin(server.url, retries=3, timeout=0.5)
        assert admin.tenants() == ["public"]
        with pytest.raises(ConnectionFailed, match="got no answer within 0.5s"):
            admin.tenants()
    assert len(server.requests) == 2
