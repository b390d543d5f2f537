"""Broker classpaths of the Pulsar lines operators run, for the version matrix and the real downgrade.

Each line's broker comes from Maven Central through `versions/pom.xml`, which imports Pulsar's own
parent POM of that release, so every jar is the one the release was built with. Debian's Maven 3.8.7
spins for minutes on the 2.10 graph, so this module fetches Maven 3.9.9 itself (the `bin` tar.gz of
`org.apache.maven:apache-maven`, through the machine's mvn) into versions/target/.

    python tests/integration/versions.py prefetch   # every line (tests/integration/setup.sh runs it)

Standard library only, like harness.py.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tarfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
MODULE = HERE / "versions"
POM = MODULE / "pom.xml"
SETTINGS = HERE / "harness" / "settings.xml"
TARGET = MODULE / "target"
MAVEN_VERSION = "3.9.9"

# The lines that can be assembled from Maven Central here: before PIP-160, the first with it, the LTS
# lines, and the newest served releases of 4.2 and 5.0; the harness's own 4.0.7 (harness/pom.xml) sits
# between them. 3.3.6 cannot be: the jars of org.apache.pulsar:jetcd-core-shaded:3.3.6 and
# pulsar-opentelemetry:3.3.6 (and 3.3.5) are missing. 4.2.5 and 5.0.0 are not served (their POMs are refused).
PRE_PIP160 = "2.10.5"
FIRST_PIP160 = "2.11.0"
PINNED = "4.0.7"
OLDER = (PRE_PIP160, FIRST_PIP160, "3.0.0", "4.0.0")
NEWER = ("4.2.4", "5.0.0-M1")
LINES = (*OLDER, *NEWER)  # what this module fetches
MATRIX_LINES = (*OLDER, PINNED, *NEWER)  # the version matrix, in release order

# Pulsar 5.0's broker needs Java 21 or newer (its release notes; clients stay on 17). Debian 12 packages
# only Java 17, so it runs on a second JDK: $PULSAR_TXN_JAVA21_HOME, else the first JDK 21+ under /usr/lib/jvm.
JAVA21_SINCE = (5, 0)
JAVA21_HOME_ENV = "PULSAR_TXN_JAVA21_HOME"
JVM_DIR = Path("/usr/lib/jvm")


def release(version: str) -> tuple[int, ...]:
    """(5, 0, 0) from '5.0.0-M1', (2, 10, 5) from '2.10.5'."""
    match = re.match(r"(\d+)\.(\d+)(?:\.(\d+))?", version)
    if not match:
        raise ValueError(f"not a Pulsar release: {version!r}")
    return tuple(int(part) for part in match.groups() if part is not None)


def java_for(version: str | None) -> str:
    """The java that runs a line's broker: the machine's own up to 4.x, a JDK 21+ from 5.0 on."""
    if version is None or release(version) < JAVA21_SINCE:
        return "java"
    return str(java21_home(version) / "bin" / "java")


def java21_home(version: str) -> Path:
    configured = os.environ.get(JAVA21_HOME_ENV)
    homes = [Path(configured)] if configured else sorted(JVM_DIR.glob("*")) if JVM_DIR.is_dir() else []
    for home in homes:
        if _java_major(home) >= 21:
            return home
    where = (
        f"{JAVA21_HOME_ENV}={configured} is not one"
        if configured
        else f"{JVM_DIR} has none and {JAVA21_HOME_ENV} is unset"
    )
    raise RuntimeError(
        f"Pulsar {version}'s broker needs a JDK 21 or newer and none was found ({where}); Debian 12 packages "
        f"only Java 17: install a Temurin 21+ JDK and point {JAVA21_HOME_ENV} at it"
    )


def _java_major(home: Path) -> int:
    """A JDK home's major version, from its `release` file (JAVA_VERSION="25.0.3"); 0 when it is not one."""
    try:
        text = (home / "release").read_text()
    except OSError:
        return 0
    match = re.search(r'^JAVA_VERSION="(\d+)', text, re.M)
    return int(match.group(1)) if match and (home / "bin" / "java").exists() else 0


def maven(log=print) -> Path:
    """Maven 3.9.9's mvn, fetched from Maven Central once."""
    home = TARGET / f"apache-maven-{MAVEN_VERSION}"
    mvn = home / "bin" / "mvn"
    if mvn.exists():
        return mvn
    TARGET.mkdir(parents=True, exist_ok=True)
    archive = TARGET / f"apache-maven-{MAVEN_VERSION}-bin.tar.gz"
    if not archive.exists():
        log(f"versions: fetching Maven {MAVEN_VERSION} from Maven Central")
        _run(
            [
                "mvn",
                "-B",
                "-q",
                "-s",
                str(SETTINGS),
                "dependency:copy",
                f"-Dartifact=org.apache.maven:apache-maven:{MAVEN_VERSION}:tar.gz:bin",
                f"-DoutputDirectory={TARGET}",
            ],
            "fetching Maven",
        )
    with tarfile.open(archive) as tar:
        tar.extractall(TARGET, filter="tar")
    return mvn


def classpath_file(version: str) -> Path:
    return TARGET / version / "classpath.txt"


def classpath_for(version: str, log=print) -> str:
    """The broker classpath of a Pulsar release (resolved once, then read from versions/target/)."""
    path = classpath_file(version)
    if not _fresh(path):
        path.parent.mkdir(parents=True, exist_ok=True)
        base = [
            str(maven(log)),
            "-B",
            "-q",
            "-s",
            str(SETTINGS),
            "-f",
            str(POM),
            f"-Dpulsar.version={version}",
            f"-Doutput={path}",
            "dependency:build-classpath",
        ]
        t0 = time.monotonic()
        try:
            _run([*base, "-o"], "offline")
        except RuntimeError:
            log(f"versions: resolving Pulsar {version}'s broker from Maven Central")
            _run(base, f"resolving Pulsar {version}")
        path.touch()  # Maven leaves an unchanged output file alone; its time says it was checked
        log(
            f"versions: Pulsar {version}: {len(path.read_text().split(os.pathsep))} jars in "
            f"{time.monotonic() - t0:.1f}s"
        )
    return path.read_text().strip()


def _fresh(path: Path) -> bool:
    if not path.exists() or path.stat().st_mtime < POM.stat().st_mtime:
        return False
    return all(Path(jar).exists() for jar in path.read_text().strip().split(os.pathsep))


def _run(cmd: list[str], what: str) -> None:
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        raise RuntimeError(f"{what} failed (exit {done.returncode}):\n{(done.stdout + done.stderr)[-4000:]}")


if __name__ == "__main__":
    if sys.argv[1:] != ["prefetch"]:
        sys.exit("usage: versions.py prefetch")
    for line in LINES:
        classpath_for(line)
        if release(line) >= JAVA21_SINCE:
            try:
                print(f"versions: Pulsar {line}'s broker runs on {java_for(line)}")
            except RuntimeError as missing:
                sys.exit(f"versions: {missing}")
