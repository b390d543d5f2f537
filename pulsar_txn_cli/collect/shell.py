"""One ledger through BookKeeper's own shell: `BookieShell -entryformat hex readledger -m -l ID`.

Two ways to run it (docs/collect.md): a `bookkeeper` script of a Pulsar or BookKeeper
distribution (`bin/bookkeeper shell ...`, which reads its configuration from $BOOKIE_CONF), or
`java -cp CLASSPATH org.apache.bookkeeper.bookie.BookieShell -conf FILE ...`. Either way the
configuration is a file of our own that names only the metadata service URI, and the entry
headers (logged at INFO by ReadLedgerCommand) must reach the output: without them the entry ids
are unknown, and the ledger is refused rather than guessed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import threading
from collections import deque
from pathlib import Path
from typing import Iterable, Iterator

from pulsar_txn_cli.errors import DataError, UsageError

MAIN = "org.apache.bookkeeper.bookie.BookieShell"
READLEDGER = ("-entryformat", "hex", "readledger", "-m", "-l")
DEFAULT_TIMEOUT = 600.0
_LOG4J = """status = error
appender.out.type = Console
appender.out.name = out
appender.out.target = SYSTEM_OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = %m%n
rootLogger.level = warn
rootLogger.appenderRef.out.ref = out
logger.readledger.name = org.apache.bookkeeper.tools.cli.commands.bookie.ReadLedgerCommand
logger.readledger.level = info
"""


class ShellFailed(DataError):
    """One ledger could not be read (the shell failed, timed out, or printed something unusable)."""


class BookieShell:
    """Runs readledger for one ledger at a time; safe to call from several threads."""

    def __init__(
        self,
        metadata_uri: str,
        *,
        script: str | None = None,
        classpath: str | None = None,
        java: str = "java",
        java_opts: tuple[str, ...] = ("-Xmx256m",),
        timeout: float = DEFAULT_TIMEOUT,
    ):
        if bool(script) == bool(classpath):
            raise UsageError(
                "collect reads ledgers with BookKeeper's shell: give --bookkeeper-shell PATH "
                "(a distribution's bin/bookkeeper) or --bookkeeper-classpath CLASSPATH"
            )
        self.timeout = timeout
        self._dir = Path(tempfile.mkdtemp(prefix="pulsar-txn-collect-"))
        conf = self._dir / "bk.conf"
        conf.write_text(f"metadataServiceUri={metadata_uri}\n", encoding="utf-8")
        self.env = dict(os.environ, BOOKIE_CONF=str(conf))
        if script:
            if not (os.path.isfile(script) and os.access(script, os.X_OK)):
                raise UsageError(
                    f"--bookkeeper-shell {script}: no such executable file (give a distribution's bin/bookkeeper)"
                )
            self.prefix = [script, "shell"]
        else:
            if shutil.which(java) is None:
                raise UsageError(
                    "--bookkeeper-classpath needs Java on PATH (e.g. apt-get install openjdk-17-jre-headless)"
                )
            log4j = self._dir / "log4j2.properties"
            log4j.write_text(_LOG4J, encoding="utf-8")
            self.prefix = [
                java,
                *java_opts,
                f"-Dlog4j.configurationFile={log4j}",
                "-Dlog4j2.is.webapp=false",
                "-cp",
                classpath,
                MAIN,
                "-conf",
                str(conf),
            ]
        self._running: set[subprocess.Popen] = set()
        self._lock = threading.Lock()
        self._closed = False

    def command(self, ledger_id: int) -> list[str]:
        return [*self.prefix, *READLEDGER, str(int(ledger_id))]

    def read(self, ledger_id: int) -> Iterator[str]:
        """The shell's lines for one ledger (stdout and stderr together, as the headers may be on
        either), streamed: a ledger of batched entries can be gigabytes of hex text."""
        proc = subprocess.Popen(
            self.command(ledger_id),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=self.env,
            text=True,
            errors="replace",
            bufsize=1 << 20,
        )
        with self._lock:
            if self._closed:
                proc.kill()
            self._running.add(proc)
        expired = threading.Event()
        timer = threading.Timer(self.timeout, lambda: (expired.set(), proc.kill()))
        timer.start()
        tail: deque[str] = deque(maxlen=3)
        try:
            for line in proc.stdout:
                if line.strip():
                    tail.append(line.strip())
                yield line
            proc.wait()
        finally:
            timer.cancel()
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            proc.stdout.close()
            with self._lock:
                self._running.discard(proc)
        if expired.is_set():
            raise ShellFailed(f"ledger {ledger_id}: the shell did not finish within {self.timeout:g} s")
        if proc.returncode != 0:
            raise ShellFailed(
                f"ledger {ledger_id}: the shell exited {proc.returncode}: {' | '.join(tail) or '(no output)'}"
            )

    def close(self) -> None:
        """Stop the shells still running (Ctrl-C) and remove the configuration files."""
        with self._lock:
            self._closed = True
            running = list(self._running)
        for proc in running:
            proc.kill()
        shutil.rmtree(self._dir, ignore_errors=True)


def entries(lines: Iterable[str], ledger_id: int, expected: int, is_open: bool) -> Iterator[tuple[int, bytes]]:
    """(entry id, bytes) of one ledger from the shell's lines, streamed and checked: every entry has
    its header, belongs to the ledger, decodes from hex, and the ids run 0..n-1 with n the broker's
    count. An open ledger may give fewer (the shell reads to the bookies' LAC, which trails the broker
    by the adds in flight at its last add: 2 seen on a real 4.0.7 broker; collect reads it again once
    closed) or more (it grew since it was listed)."""
    from pulsar_txn_cli.codec import readledger

    count = 0
    for raw in readledger.parse(lines):
        if raw.entry_id is None or raw.ledger_id is None:
            raise ShellFailed(
                f"ledger {ledger_id}: the shell printed entries without their `Lid=…, Eid=…` headers; "
                "its logging must show ReadLedgerCommand's INFO lines"
            )
        if raw.ledger_id != ledger_id:
            raise ShellFailed(f"ledger {ledger_id}: the shell printed an entry of ledger {raw.ledger_id}")
        if raw.error is not None:
            raise ShellFailed(f"ledger {ledger_id}, entry {raw.entry_id}: {raw.error.reason}")
        if raw.entry_id != count:
            raise ShellFailed(
                f"ledger {ledger_id}: entry {raw.entry_id} came where entry {count} was due (missing or repeated ids)"
            )
        count += 1
        yield raw.entry_id, raw.data
    if count != expected and not is_open:
        raise ShellFailed(f"ledger {ledger_id}: the shell printed {count} entries, the broker counts {expected}")
