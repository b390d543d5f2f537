"""The build's one addition to pyproject.toml: analyze's optional native scanner.

`optional=True`: without a C compiler the install still succeeds and `analyze` uses its
pure-Python path (same results, slower; `analyze` says so on stderr)."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("pulsar_txn_cli.pipeline._scan", ["pulsar_txn_cli/pipeline/_scan.c"], optional=True)])
