"""Transactions of Pulsar 5.0's two coordinators, written by a 5.0 client (scalable/ScalableTxns.java).

The harness's workload is the pinned 4.0.7 client, which only knows the classic coordinator; 5.0's second
coordinator (the scalable-topics one) is reached only by a 5.0 client that asks for it. The program runs as a
single-file Java program on the JDK 21+ that runs the 5.0 broker, with that broker's classpath (its client is
on it), so nothing is built.
"""

from __future__ import annotations

import json
import subprocess
import threading
from pathlib import Path

import versions

SOURCE = Path(__file__).resolve().parent / "scalable" / "ScalableTxns.java"
LINE = "5.0.0-M1"  # the client's release, whatever the broker runs (a rolled-back 4.x is read by it too)


def _java(*args: str) -> list[str]:
    return [versions.java_for(LINE), "-cp", versions.classpath_for(LINE), str(SOURCE), *args]


class ScalableRun:
    """One run of ScalableTxns: `committed` transactions end, then `held` stay open until finish()."""

    def __init__(
        self, service_url: str, topic: str, *, scalable: bool, committed: int, held: int, timeout_sec: int = 3600
    ):
        cmd = _java(service_url, topic, "true" if scalable else "false", str(committed), str(held), str(timeout_sec))
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        self.lines: list[dict] = []
        self._stderr: list[str] = []
        threading.Thread(target=lambda: self._stderr.extend(self.proc.stderr), daemon=True).start()

    def wait_holding(self, timeout: float = 180) -> list[dict]:
        timer = threading.Timer(timeout, self.proc.kill)
        timer.start()
        try:
            for line in self.proc.stdout:
                if not line.startswith("{"):
                    continue  # the client's own log lines
                record = json.loads(line)
                self.lines.append(record)
                if record["event"] == "holding":
                    return list(self.lines)
        finally:
            timer.cancel()
        raise RuntimeError(f"ScalableTxns did not hold (exit {self.proc.poll()}):\n" + "".join(self._stderr)[-5000:])

    def finish(self, action: str = "commit", timeout: float = 180) -> list[dict]:
        """Ends the held transactions ("commit" or "abort") and waits for the program to exit."""
        try:
            out, _ = self.proc.communicate(action + "\n", timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise RuntimeError(f"ScalableTxns did not end in {timeout}s:\n" + "".join(self._stderr)[-5000:]) from None
        self.lines += [json.loads(line) for line in out.splitlines() if line.startswith("{")]
        if self.proc.returncode != 0:
            raise RuntimeError(f"ScalableTxns exited {self.proc.returncode}:\n" + "".join(self._stderr)[-5000:])
        return list(self.lines)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def ids(lines: list[dict], outcome: str) -> list[str]:
    """The transactions of one outcome, as the tool writes them ("most:least")."""
    return [f"{r['most']}:{r['least']}" for r in lines if r.get("event") == "txn" and r["outcome"] == outcome]


def read_all(service_url: str, topic: str, timeout: float = 180) -> list[str]:
    """Every message a reader reaches from the topic's start (it waits 60 s for the first, 10 s for each next)."""
    cmd = _java(service_url, topic, "read")
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if out.returncode != 0:
        raise RuntimeError(f"ScalableTxns read exited {out.returncode}:\n{out.stderr[-5000:]}")
    return next(json.loads(line) for line in out.stdout.splitlines() if line.startswith("{"))["values"]
