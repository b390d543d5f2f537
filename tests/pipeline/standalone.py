"""A real Spark standalone cluster for the spark_cluster tests and bench/bench_spark_cluster.py:
a master and N workers, each its own JVM started with the pyspark installation's spark-class,
bound to 127.0.0.1 on ports chosen at run time; their executors run a Python of their own that
has only PySpark, pyarrow and pandas (never pulsar-txn, never protobuf).

    python -m tests.pipeline.standalone prefetch   # make the executors' Python (tests/integration/setup.sh runs it)
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from importlib.metadata import version
from pathlib import Path

EXECUTOR_PACKAGES = ("pyspark", "pyarrow", "pandas")  # pinned to the driver's versions


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def executor_python() -> str:
    """A venv with only the executor packages, made once (pip, from the pip cache when warm)."""
    pins = [f"{name}=={version(name)}" for name in EXECUTOR_PACKAGES]
    tag = "-".join([f"py{sys.version_info[0]}{sys.version_info[1]}", *(p.replace("==", "") for p in pins)])
    venv = Path.home() / ".cache" / "pulsar-txn-tests" / f"executor-venv-{tag}"
    python = venv / "bin" / "python"
    if not (venv / ".complete").exists():
        shutil.rmtree(venv, ignore_errors=True)
        base = getattr(sys, "_base_executable", sys.executable)
        subprocess.run([base, "-m", "venv", str(venv)], check=True)
        done = subprocess.run([str(python), "-m", "pip", "install", "-q", *pins], capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"could not make the executors' Python in {venv}: pip said\n{done.stderr[-2000:]}")
        (venv / ".complete").touch()
    return str(python)


def importable(python: str, module: str) -> bool:
    """Whether `module` imports in `python` (isolated mode, from a neutral directory)."""
    return subprocess.run([python, "-I", "-c", f"import {module}"], cwd="/", capture_output=True).returncode == 0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Standalone:
    """`with Standalone(workdir, workers=2) as cluster:` cluster.master is the spark:// URL."""

    def __init__(self, workdir: Path, workers: int = 2, cores: int = 1, memory: str = "1g"):
        self.workdir, self.workers, self.cores, self.memory = Path(workdir), workers, cores, memory
        self.port, self.ui = free_port(), free_port()
        self.master = f"spark://127.0.0.1:{self.port}"
        self.procs: list[subprocess.Popen] = []

    def env(self) -> dict:
        # Nothing of the test's Python leaks into the executors' (PYTHONPATH reaches their workers).
        inherited = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYSPARK_PYTHON")}
        return {**inherited, "SPARK_HOME": str(spark_home()), "SPARK_LOCAL_IP": "127.0.0.1",
                "SPARK_DAEMON_MEMORY": "256m", "SPARK_LOG_DIR": str(self.workdir)}

    def _start(self, name: str, *args: str) -> None:
        log = open(self.workdir / f"{name}.log", "wb")
        cmd = [str(spark_home() / "bin" / "spark-class"), *args]
        self.procs.append(subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=self.env(), start_new_session=True))
        log.close()

    def __enter__(self) -> "Standalone":
        self.workdir.mkdir(parents=True, exist_ok=True)
        try:
            self._start("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                        "--port", str(self.port), "--webui-port", str(self.ui))
            self._wait(lambda state: True, "the master to answer")
            for i in range(self.workers):
                self._start(f"worker-{i}", "org.apache.spark.deploy.worker.Worker", self.master, "--host", "127.0.0.1",
                            "--port", "0", "--webui-port", "0", "--cores", str(self.cores), "--memory", self.memory,
                            "--work-dir", str(self.workdir / f"work-{i}"))
            self._wait(lambda state: state.get("aliveworkers") == self.workers, f"{self.workers} workers to register")
        except BaseException:
            self.__exit__()
            raise
        return self

    def state(self) -> dict:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.ui}/json/", timeout=5) as answer:
            return json.load(answer)

    def _wait(self, ready, what: str, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            dead = [p for p in self.procs if p.poll() is not None]
            if dead:
                raise RuntimeError(f"a Spark daemon exited while waiting for {what}: see the logs in {self.workdir}")
            try:
                if ready(self.state()):
                    return
            except OSError:
                pass
            time.sleep(0.5)
        raise RuntimeError(f"timed out after {timeout:.0f}s waiting for {what}: see the logs in {self.workdir}")

    def __exit__(self, *exc) -> None:
        for proc in reversed(self.procs):  # workers first; each group holds a worker's executors too
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        self.procs.clear()

    def driver_conf(self, python: str) -> dict:
        """Spark settings for a driver on this machine whose executors run `python`."""
        return {"spark.pyspark.python": python, "spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1",
                "spark.executor.memory": "512m", "spark.executor.cores": str(self.cores)}


if __name__ == "__main__":
    if sys.argv[1:] != ["prefetch"]:
        sys.exit("usage: python -m tests.pipeline.standalone prefetch")
    start = time.monotonic()
    print(f"executors' Python (only {', '.join(EXECUTOR_PACKAGES)}): {executor_python()} "
          f"(ready in {time.monotonic() - start:.0f}s)")
