"""Run the CLI under cProfile, every thread included: python -m bench.profiled OUT.prof ARGS...

`python -m bench fleet --profile=DIR` runs its commands through this to say where a command's CPU goes
(its figures are then not the published ones: profiling slows every call). cProfile alone sees only the
main thread; the admin calls run on --concurrency's threads, so each new thread gets its own profile and
all are merged into OUT.prof at exit.
"""

from __future__ import annotations

import cProfile
import pstats
import runpy
import sys
import threading

profiles: list[cProfile.Profile] = []


def _profile_this_thread(*_):
    profile = cProfile.Profile()
    profiles.append(profile)
    profile.enable()  # replaces this hook for the rest of the thread


def main() -> None:
    out = sys.argv[1]
    sys.argv = ["pulsar-txn", *sys.argv[2:]]
    threading.setprofile(_profile_this_thread)
    _profile_this_thread()
    try:
        runpy.run_module("pulsar_txn_cli", run_name="__main__", alter_sys=True)
    finally:
        threading.setprofile(None)
        profiles[0].disable()
        pstats.Stats(*profiles).dump_stats(out)


if __name__ == "__main__":
    main()
