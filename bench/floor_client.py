"""The REST floor: a command's GETs fired by a bare asyncio HTTP/1.1 client (stdlib streams, keep-alive),
`concurrency` connections at a time. bench_fleet.py calls `floor` in process, and runs this file as its own process
(`python bench/floor_client.py URL REQUESTS.json CONCURRENCY`, printing {"seconds", "differs"}) to time the floor as a
client program, start-up included. Standard library only, so that the process imports nothing else.

Bare streams, not httpx's AsyncClient (the venv has no aiohttp): at 16 connections httpx's async pool got 291 req/s
from the broker where pulsar-txn's own doctor got 755, so it measured itself, not the broker."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import time
from urllib.parse import urlsplit


def floor(url: str, requests: list[tuple], concurrency: int, parse: bool = False) -> tuple[float, int]:
    """The GETs of `requests` ((method, path, status, ms) as the broker logged them) replayed:
    (seconds, answers whose status differs from the logged one). With `parse`, each answer's JSON is decoded too,
    as any client that uses the answers must (the floor proper only reads the bytes)."""
    return asyncio.run(_floor(url, [r for r in requests if r[0] == "GET"], concurrency, parse))


async def _floor(url: str, requests, concurrency: int, parse: bool = False) -> tuple[float, int]:
    host, port = urlsplit(url).hostname, urlsplit(url).port or 80
    queue = list(reversed(requests))
    differs = 0

    async def worker() -> None:
        nonlocal differs
        reader, writer = await asyncio.open_connection(host, port)
        try:
            while queue:
                _, path, status, _ms = queue.pop()
                head = f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nAccept: application/json\r\n\r\n"
                writer.write(head.encode())
                got, body = await _response(reader)
                differs += got != status
                if parse and body:
                    with contextlib.suppress(ValueError):  # /metrics/ is Prometheus text, an error page HTML
                        json.loads(body)
        finally:
            writer.close()

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(min(concurrency, len(requests)))))
    return time.perf_counter() - start, differs


async def _response(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    """Read one response (Content-Length or chunked body) off a keep-alive connection: its status and body."""
    status = int((await reader.readline()).split()[1])
    length, chunked = 0, False
    while (line := await reader.readline()) not in (b"\r\n", b""):
        name, _, value = line.decode("latin-1").partition(":")
        if name.lower() == "content-length":
            length = int(value)
        elif name.lower() == "transfer-encoding" and "chunked" in value.lower():
            chunked = True
    if not chunked:
        return status, await reader.readexactly(length)
    chunks = []
    while size := int((await reader.readline()).split(b";")[0], 16):
        chunks.append((await reader.readexactly(size + 2))[:-2])
    await reader.readline()  # the empty trailer
    return status, b"".join(chunks)


if __name__ == "__main__":
    url, paths, concurrency = sys.argv[1], sys.argv[2], int(sys.argv[3])
    with open(paths) as f:
        requests = [("GET", path, status, 0) for path, status in json.load(f)]
    seconds, differs = floor(url, requests, concurrency)
    print(json.dumps({"seconds": seconds, "differs": differs}))
