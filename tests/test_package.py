"""The real package: a wheel and an sdist built with `python -m build`, the wheel installed into a
clean virtual environment (no project source on its path), and the quick start's demo run there."""

from __future__ import annotations

import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run(cmd, **kw):
    done = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=600, **kw)
    assert done.returncode == 0, (
        f"{' '.join(map(str, cmd))} exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    )
    return done


def test_the_wheel_installs_into_a_clean_venv_and_runs_the_demo(tmp_path):
    dist = tmp_path / "dist"
    run([sys.executable, "-m", "build", "--outdir", dist, ROOT])
    [wheel] = dist.glob("pulsar_txn-*.whl")
    [sdist] = dist.glob("pulsar_txn-*.tar.gz")
    names = zipfile.ZipFile(wheel).namelist()
    assert "pulsar_txn_cli/exporter/grafana-dashboard.json" in names
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names), names[-10:]
    entry_points = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith("entry_points.txt"))).decode()
    assert "pulsar-txn = " in entry_points and "pulsarctl-txn = " in entry_points
    sources = tarfile.open(sdist).getnames()
    assert any(n.endswith("/LICENSE") for n in sources)
    for module in ("pipeline/_scan", "codec/_render"):  # optional in setup.py: only this says a build failed
        assert any(n.startswith(f"pulsar_txn_cli/{module}.") and n.endswith(".so") for n in names), module
        assert any(n.endswith(f"pulsar_txn_cli/{module}.c") for n in sources), module

    venv = tmp_path / "venv"
    run([getattr(sys, "_base_executable", sys.executable), "-m", "venv", venv])
    run([venv / "bin" / "pip", "install", "-q", wheel])
    home = tmp_path / "home"
    env = {
        "PATH": f"{venv / 'bin'}:/usr/bin:/bin",
        "HOME": str(home),
        "XDG_DATA_HOME": str(home / "data"),
        "XDG_STATE_HOME": str(home / "state"),
        "NO_COLOR": "1",
        "LANG": "C.UTF-8",
    }
    where = run(
        [venv / "bin" / "python", "-c", "import pulsar_txn_cli, sys; print(pulsar_txn_cli.__file__)"],
        cwd=tmp_path,
        env=env,
    ).stdout
    assert where.startswith(str(venv)), where  # the installed copy, not the source tree
    demo = run([venv / "bin" / "pulsar-txn", "demo"], cwd=tmp_path, env=env)
    assert "SAFE" in demo.stdout + demo.stderr
