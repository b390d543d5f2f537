"""What the tool says of Pulsar 5.0's scalable-topics coordinator (pure parts; a real 5.0.0-M1 broker in
tests/integration/test_second_coordinator.py)."""

from __future__ import annotations

from pulsar_txn_cli import scalable_coordinator as scalable

TOPIC = "persistent://public/default/scal-t"
METRICS = f"""# TYPE pulsar_txn_tb_active_total gauge
pulsar_txn_tb_active_total{{cluster="standalone",namespace="public/default",topic="{TOPIC}"}} 3
pulsar_txn_tb_active_total{{cluster="standalone",namespace="public/default",topic="persistent://public/default/c"}} 1
pulsar_txn_tb_committed_total{{cluster="standalone",namespace="public/default",topic="{TOPIC}"}} 0
"""


def test_what_the_buffers_count_beyond_the_classic_coordinators():
    classic = {"(0,3)": {"producedPartitions": {"persistent://public/default/c": {}}}}
    assert scalable.beyond_classic({TOPIC: 3, "persistent://public/default/c": 1}, classic) == {TOPIC: 3}


def test_the_sentence_counts_or_says_none_never_silent():
    view = scalable.SecondCoordinator(["http://b1"], {TOPIC: 3})
    line = view.sentence("this list")
    assert "this list leaves them out" in line and "count 3 open transaction(s) on 1 topic(s)" in line
    assert f"{TOPIC} 3" in line
    empty = scalable.SecondCoordinator(["http://b1"]).sentence("this list")
    assert "count no open transaction beyond the classic coordinators'" in empty
    assert view.to_json()["uncoveredTransactionsCounted"] == 3
    assert scalable.SecondCoordinator(["b"], error="x").to_json()["uncoveredTransactionsCounted"] is None


class Admin:
    """The calls detect() makes, answering as a 5.0.0-M1 standalone did (docs/real-broker-findings.md)."""

    def __init__(self, setting):
        self.setting = setting

    def broker_web_urls(self):
        return ["http://127.0.0.1:8080"]

    def runtime_config(self, url=None):
        return {} if self.setting is None else {scalable.SETTING: self.setting}

    def metrics_text(self, url=None):
        return METRICS


def test_detect_only_where_a_broker_has_it_on():
    assert scalable.detect(Admin(None), {}) is None  # before 5.0: no such setting
    assert scalable.detect(Admin("false"), {}) is None
    view = scalable.detect(Admin("true"), {"(0,3)": {"producedPartitions": {"persistent://public/default/c": {}}}})
    assert view.counted == {TOPIC: 3} and view.brokers == ["http://127.0.0.1:8080"]
