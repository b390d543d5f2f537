"""Regenerate the shell completion scripts in completions/ from the CLI.

Usage: .venv/bin/python scripts/gen_completions.py [OUT_DIR]   (default: completions/)

The scripts are the ones `pulsar-txn completion SHELL` prints (pulsar_txn_cli/completion.py).
tests/cli/test_completions.py fails when the checked-in files differ from what this script writes.
"""

import sys
from pathlib import Path

from pulsar_txn_cli.completion import SHELLS, script

ROOT = Path(__file__).resolve().parent.parent


def generate(out_dir: Path) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for shell, (name, _install) in SHELLS.items():
        path = out_dir / name
        path.write_text(script(shell))
        written.append(path)
    return written


if __name__ == "__main__":
    for path in generate(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "completions"):
        print(path)
