"""The build's one addition to pyproject.toml: two optional native hot paths, analyze's entry
scanner and decode's JSON renderer.

`optional=True`: without a C compiler the install still succeeds and both commands use their
pure-Python paths (same results, slower; `analyze` says so on stderr)."""

from setuptools import Extension, setup

WIRE = ["pulsar_txn_cli/_wire.h"]  # the wire format both read (shipped in the sdist as package data)

setup(
    ext_modules=[
        Extension("pulsar_txn_cli.pipeline._scan", ["pulsar_txn_cli/pipeline/_scan.c"], depends=WIRE, optional=True),
        Extension("pulsar_txn_cli.codec._render", ["pulsar_txn_cli/codec/_render.c"], depends=WIRE, optional=True),
    ]
)
