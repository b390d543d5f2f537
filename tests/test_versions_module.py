"""tests/integration/versions.py's release parsing and its choice of the JDK that runs a line's broker
(Pulsar 5.0's needs Java 21+, which Debian 12 does not package). The JDK homes here are directories
laid out as a JDK's (its `release` file and bin/java), not JDKs: only those two files are read."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "integration"))

import versions  # noqa: E402


@pytest.mark.parametrize(
    ("version", "expected"),
    [("5.0.0-M1", (5, 0, 0)), ("2.10.5", (2, 10, 5)), ("4.2", (4, 2)), ("4.0.7-SNAPSHOT", (4, 0, 7))],
)
def test_release_reads_milestones_as_their_release(version, expected):
    assert versions.release(version) == expected


def test_release_refuses_what_is_not_a_version():
    with pytest.raises(ValueError, match="not a Pulsar release: 'latest'"):
        versions.release("latest")


def test_the_matrix_is_in_release_order_with_the_pinned_line_in_it():
    assert list(versions.MATRIX_LINES) == sorted(versions.MATRIX_LINES, key=versions.release)
    assert versions.PINNED in versions.MATRIX_LINES and versions.PINNED not in versions.LINES


def jdk(root: Path, name: str, version: str) -> Path:
    home = root / name
    (home / "bin").mkdir(parents=True)
    (home / "bin" / "java").write_text("")
    (home / "release").write_text(f'IMPLEMENTOR="test"\nJAVA_VERSION="{version}"\n')
    return home


def test_lines_before_5_0_run_on_the_machines_java(monkeypatch, tmp_path):
    monkeypatch.setattr(versions, "JVM_DIR", tmp_path)
    assert [versions.java_for(v) for v in (None, "2.10.5", "4.2.4")] == ["java"] * 3


def test_5_0_runs_on_the_first_jdk_21_or_newer(monkeypatch, tmp_path):
    monkeypatch.delenv(versions.JAVA21_HOME_ENV, raising=False)
    monkeypatch.setattr(versions, "JVM_DIR", tmp_path)
    jdk(tmp_path, "java-17-openjdk-amd64", "17.0.15")
    newer = jdk(tmp_path, "temurin-25-jdk-amd64", "25.0.3")
    assert versions.java_for("5.0.0-M1") == str(newer / "bin" / "java")


def test_the_environment_names_the_jdk(monkeypatch, tmp_path):
    chosen = jdk(tmp_path, "elsewhere", "21.0.8")
    monkeypatch.setenv(versions.JAVA21_HOME_ENV, str(chosen))
    monkeypatch.setattr(versions, "JVM_DIR", tmp_path / "none")
    assert versions.java_for("5.0.0-M1") == str(chosen / "bin" / "java")


def test_no_jdk_21_is_one_sentence_naming_what_is_missing(monkeypatch, tmp_path):
    monkeypatch.delenv(versions.JAVA21_HOME_ENV, raising=False)
    monkeypatch.setattr(versions, "JVM_DIR", tmp_path)
    jdk(tmp_path, "java-17-openjdk-amd64", "17.0.15")
    with pytest.raises(RuntimeError) as missing:
        versions.java_for("5.0.0-M1")
    assert str(missing.value) == (
        f"Pulsar 5.0.0-M1's broker needs a JDK 21 or newer and none was found ({tmp_path} has none and "
        "PULSAR_TXN_JAVA21_HOME is unset); Debian 12 packages only Java 17: install a Temurin 21+ JDK and point "
        "PULSAR_TXN_JAVA21_HOME at it"
    )


def test_a_named_home_that_is_not_a_jdk_21_is_said_so(monkeypatch, tmp_path):
    old = jdk(tmp_path, "old", "17.0.15")
    monkeypatch.setenv(versions.JAVA21_HOME_ENV, str(old))
    with pytest.raises(RuntimeError, match=f"{versions.JAVA21_HOME_ENV}={old} is not one"):
        versions.java_for("5.0.0-M1")
