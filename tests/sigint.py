"""Children that a test interrupts with SIGINT start with SIGINT at its default.

A test run launched from a background job, `nohup` or some CI launchers inherits SIGINT *ignored*;
a child inherits that, Python then installs no KeyboardInterrupt handler, and a Ctrl-C test's SIGINT
does nothing (the command runs on and the test fails for the launcher's sake, not the product's).
Every test that sends SIGINT starts its child through `popen` (tests/test_sigint_ignored.py checks it).
"""

from __future__ import annotations

import signal
import subprocess


def default_sigint() -> None:
    """A preexec_fn: SIGINT back to its default disposition in the child (before exec)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def popen(cmd, **kwargs) -> subprocess.Popen:
    """subprocess.Popen with SIGINT at its default in the child."""
    return subprocess.Popen(cmd, preexec_fn=default_sigint, **kwargs)
