"""The connection pool's own HTTP/1.1 (admin/http_pool.py) against a real local socket server that answers with
raw bytes: each framing an answer may use, and each way an answer can be broken."""

from __future__ import annotations

import socket
import threading

import pytest

from pulsar_txn_cli.admin import http_pool
from pulsar_txn_cli.errors import ConnectionFailed
from tests.admin.conftest import Sleeps, rest_admin


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
                while len(buffer) < length:
                    buffer += conn.recv(65536)
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
    "answer",
    [
        b"HTTP/1.1 2xx OK\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: many\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n[1, 2" + RawServer.CLOSE,
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n" + RawServer.CLOSE,
        b"HTTP/1.1 200 OK\r\nX-Long: " + b"a" * (http_pool.MAX_HEAD + 10) + b"\r\n\r\n",
        b"" + RawServer.CLOSE,
    ],
    ids=["bad-status", "bad-header", "bad-length", "truncated", "bad-chunk", "huge-head", "no-answer"],
)
def test_a_broken_answer_is_one_sentence_and_its_connection_closed(answer):
    with RawServer(answer) as server:
        with pytest.raises(ConnectionFailed, match="dropped the connection during GET /admin/v2/tenants"):
            admin_at(server).tenants()


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
