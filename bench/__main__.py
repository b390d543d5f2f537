"""Run benchmarks: python -m bench [NAME ...] [--OPTION=VALUE ...]. Each bench/bench_NAME.py has a main(argv).

Every bench is framed by two `machine:` lines (bench/machine.py): the load and the stolen CPU time
measured while it ran, so a figure is never published without the conditions it was taken in.
"""

import importlib
import pkgutil
import sys
from pathlib import Path

from bench import machine


def main(argv: list[str]) -> int:
    here = Path(__file__).parent
    available = sorted(
        m.name[len("bench_") :] for m in pkgutil.iter_modules([str(here)]) if m.name.startswith("bench_")
    )
    names = [a for a in argv if not a.startswith("-")] or available
    extra = [a for a in argv if a.startswith("-")]
    for name in names:
        if name not in available:
            print(f"unknown benchmark {name!r}; available: {', '.join(available)}", file=sys.stderr)
            return 2
        print(f"== bench {name}", flush=True)
        with machine.report(name):
            importlib.import_module(f"bench.bench_{name}").main(extra)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
