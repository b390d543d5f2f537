"""Run the `pulsar-txn` CLI against a real broker, in process (tests/conftest.py's run_cli).

Each Tool keeps the CLI's per-target state (batch-log change records, downgrade checkpoints) in
its own directory, so tests never touch the user's state.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import run_cli


class ToolError(AssertionError):
    pass


def recording_runner(state: Path, outputs: list, extra_env: dict | None = None):
    """A `run(*args, env=None)` of the CLI with --debug that keeps its state in `state` and appends
    everything it printed to `outputs` (the secured suites search that for secrets at the end)."""

    def run(*args, env=None):
        result = run_cli(
            [*map(str, args), "--debug"],
            env={"XDG_STATE_HOME": str(state), "NO_COLOR": "1", "COLUMNS": "200", **(extra_env or {}), **(env or {})},
        )
        outputs.append(result.stdout + result.stderr)
        return result

    run.state = state
    return run


class Tool:
    def __init__(self, admin_url: str, state_dir: Path):
        self.admin_url = admin_url
        self.state_dir = Path(state_dir)
        self.state_dir.mkdir(parents=True, exist_ok=True)

    def run(self, *args, expect: int | tuple[int, ...] | None = 0, target: bool = True):
        argv = [str(a) for a in args]
        if target:
            argv += ["--admin-url", self.admin_url]
        result = run_cli(argv, env={"XDG_STATE_HOME": str(self.state_dir), "NO_COLOR": "1", "COLUMNS": "200"})
        codes = (expect,) if isinstance(expect, int) else expect
        if codes is not None and result.exit_code not in codes:
            raise ToolError(
                f"pulsar-txn {' '.join(argv)} exited {result.exit_code} (expected {expect}):\n"
                f"stdout: {result.stdout[-4000:]}\nstderr: {result.stderr[-4000:]}"
            )
        return result

    def json(self, *args, expect=0):
        result = self.run(*args, "-o", "json", expect=expect)
        return result.json()

    def records(self, *args, expect=0):
        """-o json output, which for a list command is a list."""
        return self.json(*args, expect=expect)

    def decode(self, dump: Path, log: str) -> list[dict]:
        result = self.run("decode", dump, "--log", log, "-o", "json", target=False)
        assert "error" not in result.stderr.lower(), result.stderr
        return result.json()


def position(text: str) -> tuple[int, int]:
    ledger, entry = text.split(":")
    return int(ledger), int(entry)


def dump_ledgers(broker, ledgers: list[int], path: Path) -> Path:
    """`readledger` of every ledger, concatenated into one dump file (decode reads several ledgers)."""
    path.write_text("\n".join(broker.readledger(ledger) for ledger in ledgers))
    return path


def after(entries: list[dict], mark: tuple[int, int] | None) -> list[dict]:
    """Decoded entries written after MARK (a lastConfirmedEntry taken before a phase)."""
    return [e for e in entries if mark is None or (e["ledgerId"], e["entryId"]) > mark]


def txn_key(most: int, least: int) -> str:
    return f"({most},{least})"


def dumps(obj) -> str:
    return json.dumps(obj, indent=1, sort_keys=True)[:3000]
