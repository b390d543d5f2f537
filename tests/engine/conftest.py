from __future__ import annotations

import pytest

from tests.engine.helpers import Rig


@pytest.fixture
def rig(tmp_path):
    rig = Rig(tmp_path / "engine")
    yield rig
    rig.close()


@pytest.fixture
def engine_factory(tmp_path):
    from pulsar_txn_cli.engine.broker import Engine

    opened = []

    def make(coordinators=1, **config):
        engine = Engine.init(tmp_path / f"engine{len(opened)}", coordinators=coordinators)
        for key, value in config.items():
            engine.config.set(key, value)
        if config:
            engine.reload()
        opened.append(engine)
        return engine

    yield make
    for engine in opened:
        engine.close()
