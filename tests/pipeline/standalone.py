"""A real Spark standalone cluster for the spark_cluster tests and bench/bench_spark_cluster.py:
a master and N workers, each its own JVM started with the pyspark installation's spark-class,
bound to 127.0.0.1 on ports chosen at run time; their executors run a Python of their own that
has only PySpark, pyarrow and pandas (never pulsar-txn, never protobuf).

    python -m tests.pipeline.standalone prefetch   # the executors' Python, S3Proxy, the S3A connector
                                                   # (tests/integration/setup.sh runs it)

Also a real S3-compatible server (S3Proxy from Maven Central) for the s3a:// tests.
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
        inherited = {
            k: v
            for k, v in os.environ.items()
            if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYSPARK_PYTHON")
        }
        return {
            **inherited,
            "SPARK_HOME": str(spark_home()),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_DAEMON_MEMORY": "256m",
            "SPARK_LOG_DIR": str(self.workdir),
        }

    def _start(self, name: str, *args: str) -> None:
        log = open(self.workdir / f"{name}.log", "wb")
        cmd = [str(spark_home() / "bin" / "spark-class"), *args]
        self.procs.append(
            subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=self.env(), start_new_session=True)
        )
        log.close()

    def __enter__(self) -> "Standalone":
        self.workdir.mkdir(parents=True, exist_ok=True)
        try:
            self._start(
                "master",
                "org.apache.spark.deploy.master.Master",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--webui-port",
                str(self.ui),
            )
            self._wait(lambda state: True, "the master to answer")
            for i in range(self.workers):
                self._start(
                    f"worker-{i}",
                    "org.apache.spark.deploy.worker.Worker",
                    self.master,
                    "--host",
                    "127.0.0.1",
                    "--port",
                    "0",
                    "--webui-port",
                    "0",
                    "--cores",
                    str(self.cores),
                    "--memory",
                    self.memory,
                    "--work-dir",
                    str(self.workdir / f"work-{i}"),
                )
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
        return {
            "spark.pyspark.python": python,
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.executor.memory": "512m",
            "spark.executor.cores": str(self.cores),
        }


# ---------------------------------------------------------------- a real S3-compatible server

S3PROXY = ("org.gaul", "s3proxy", "4.1.0")
ROOT = Path(__file__).resolve().parents[2]


def s3proxy_jar() -> Path:
    """S3Proxy's self-contained jar from Maven Central (into ~/.m2, with the harness's settings)."""
    group, artifact, release = S3PROXY
    jar = (
        Path.home()
        / ".m2"
        / "repository"
        / group.replace(".", "/")
        / artifact
        / release
        / f"{artifact}-{release}-jar-with-dependencies.jar"
    )
    if not jar.exists():
        if shutil.which("mvn") is None:
            raise RuntimeError("Maven is needed to fetch S3Proxy: apt-get install maven (./dev setup)")
        settings = ROOT / "tests" / "integration" / "harness" / "settings.xml"
        subprocess.run(
            [
                "mvn",
                "-B",
                "-q",
                "-s",
                str(settings),
                "dependency:get",
                "-Dtransitive=false",
                f"-Dartifact={group}:{artifact}:{release}:jar:jar-with-dependencies",
            ],
            check=True,
        )
    return jar


def s3a_connector() -> str:
    """Resolve the S3A connector as a Spark user does (spark.jars.packages, from Maven Central
    into Ivy's cache); returns the package's coordinates."""
    from pulsar_txn_cli.pipeline import remote, spark_job

    conf, _ = remote.with_connector(["s3a://prefetch/"], {})
    with spark_job.Session("local[1]", conf, ship=False) as spark:
        from py4j.java_gateway import JavaClass

        # py4j looks classes up as Spark's own loader does (java.lang.Class.forName would not see the package)
        if not isinstance(spark.sparkContext._jvm.org.apache.hadoop.fs.s3a.S3AFileSystem, JavaClass):
            raise RuntimeError(
                f"{conf['spark.jars.packages']} was resolved, but S3AFileSystem is not on Spark's classpath"
            )
    return conf["spark.jars.packages"]


class S3Proxy:
    """`with S3Proxy(workdir) as s3:` a real S3 API (S3Proxy, filesystem blobstore) on 127.0.0.1;
    s3.bucket(name) is the directory that holds a bucket's objects."""

    ACCESS_KEY = "pulsar-txn-test-access"
    SECRET_KEY = "pulsar-txn-test-secret-Zq7Wv2"

    def __init__(self, workdir: Path):
        self.workdir, self.port = Path(workdir), free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.proc = None

    def bucket(self, name: str) -> Path:
        folder = self.workdir / "blobs" / name
        folder.mkdir(parents=True, exist_ok=True)
        return folder

    def __enter__(self) -> "S3Proxy":
        (self.workdir / "blobs").mkdir(parents=True, exist_ok=True)
        props = self.workdir / "s3proxy.properties"
        props.write_text(
            "\n".join(
                [
                    f"s3proxy.endpoint={self.endpoint}",
                    "s3proxy.authorization=aws-v2-or-v4",
                    f"s3proxy.identity={self.ACCESS_KEY}",
                    f"s3proxy.credential={self.SECRET_KEY}",
                    "jclouds.provider=filesystem",
                    f"jclouds.filesystem.basedir={self.workdir / 'blobs'}",
                    "",
                ]
            )
        )
        log = open(self.workdir / "s3proxy.log", "wb")
        self.proc = subprocess.Popen(
            ["java", "-Xmx256m", "-jar", str(s3proxy_jar()), "--properties", str(props)],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"S3Proxy exited: see {self.workdir / 's3proxy.log'}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return self
            except OSError:
                time.sleep(0.5)
        self.__exit__()
        raise RuntimeError(f"S3Proxy did not listen within 120 s: see {self.workdir / 's3proxy.log'}")

    def __exit__(self, *exc) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()

    def spark_conf(self) -> dict:
        """Where S3A finds this server (the keys come from the environment: env())."""
        return {
            "spark.hadoop.fs.s3a.endpoint": self.endpoint,
            "spark.hadoop.fs.s3a.path.style.access": "true",
            "spark.hadoop.fs.s3a.connection.ssl.enabled": "false",
            "spark.hadoop.fs.s3a.endpoint.region": "us-east-1",
            # Hadoop 3.5's default "analytics" stream and S3A's change detection need an ETag, which
            # S3Proxy's filesystem store has only for objects uploaded through it; the tests also place
            # files in the bucket's directory
            "spark.hadoop.fs.s3a.input.stream.type": "classic",
            "spark.hadoop.fs.s3a.change.detection.mode": "none",
            "spark.hadoop.fs.s3a.change.detection.version.required": "false",
        }

    def env(self) -> dict:
        return {"AWS_ACCESS_KEY_ID": self.ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": self.SECRET_KEY}


if __name__ == "__main__":
    if sys.argv[1:] != ["prefetch"]:
        sys.exit("usage: python -m tests.pipeline.standalone prefetch")
    for what, fetch in (
        ("executors' Python (only " + ", ".join(EXECUTOR_PACKAGES) + ")", executor_python),
        ("S3Proxy", s3proxy_jar),
        ("the S3A connector (Ivy's cache)", s3a_connector),
    ):
        start = time.monotonic()
        print(f"{what}: {fetch()} (ready in {time.monotonic() - start:.0f}s)", flush=True)
