"""What the machine did while a bench ran, measured rather than assumed: its cores, the load average
at the start and at the end, and the CPU time the hypervisor stole (a virtual machine's host may take
a share of a core for seconds). Each bench's figures are printed between these two lines."""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path


def _cpu_times() -> list[int]:
    """The aggregate `cpu` line of /proc/stat: user nice system idle iowait irq softirq steal ..."""
    return [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]


def installed_env(environ=None) -> dict:
    """The environment for timing the tool as a process: its bytecode cached, as an installed
    package has it (pip compiles it at install time). PYTHONDONTWRITEBYTECODE=1 in a developer's or
    CI's environment would keep the cache from ever being written, so every run would compile the
    modules again."""
    return {k: v for k, v in (os.environ if environ is None else environ).items() if k != "PYTHONDONTWRITEBYTECODE"}


@contextmanager
def report(name: str):
    before = _cpu_times()
    print(
        f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the start of bench {name}",
        flush=True,
    )
    try:
        yield
    finally:
        after = _cpu_times()
        delta = [b - a for a, b in zip(before, after)]
        total = sum(delta[:8]) or 1
        steal = delta[7] if len(delta) > 7 else 0
        busy = total - delta[3] - delta[4]
        print(
            f"machine: load average {os.getloadavg()[0]:.1f} at the end of bench {name}; over the run the CPUs were "
            f"{100 * busy / total:.0f}% busy (this bench and every other process) and {100 * steal / total:.1f}% stolen by the host",
            flush=True,
        )
