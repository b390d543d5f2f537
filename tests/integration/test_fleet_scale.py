"""A real Pulsar 4.0.7 broker at fleet scale (marker `scale`).

One standalone broker with batched coordinator and pending-ack logs; a partitioned topic grown to 100, 300 and
1,000 partitions (the build is paid once: about 75 s in all on the project's machine), one subscription a
partition, each with a pending-ack log. At each size `downgrade check`, `subscriptions`,
`get-txn-pending-ack-batch-log-stat`, `stuck-readers -n` and `doctor` run as real CLI processes against the admin
URL; the broker's own request log counts their requests, which a bare asyncio client then replays (the floor),
and one `pulsar-admin` JVM is timed (the anchor). `bench/bench_fleet.py` measures; `python -m bench fleet` prints
the same figures (docs/figures.md). Only what is robust on a shared 2-core machine is asserted: nothing failed;
the fleet the broker itself lists (its partitioned stats: each partition with the fleet's subscription) is the
fleet grown, every command's own count equals it, and every command asked the broker about each of its partitions
(the broker's request log); requests and time grow no faster than the fleet; and the tool's admin layer costs at
most ADMIN_LAYER_BOUND times the CPU a request of a bare pycurl loop (the same run).
"""

from __future__ import annotations

import pytest

from bench import bench_fleet
from tests.conftest import isolate

pytestmark = pytest.mark.scale

SIZES = bench_fleet.SIZES
# Time per subscription at the largest size, over the smallest's: fixed costs (start-up, discovery) make it
# fall as the fleet grows; more than this would be growth faster than the fleet's.
PER_SUB_GROWTH_BOUND = 2.0
# The admin layer's CPU a request over the bare pycurl loop's, the same GET on this broker (bench_fleet.transport_cost):
# six runs on 2026-11-27 at load average 16 to 17 measured 1.51, 1.62, 1.63, 1.64, 1.66 and 1.83 (median 1.63). The
# bound sits above the highest and below 1.5 times the lowest (2.26): an admin layer half again as costly fails.
ADMIN_LAYER_BOUND = 2.0


@pytest.fixture(autouse=True)
def _isolated(monkeypatch, tmp_path):
    isolate(monkeypatch, tmp_path)


@pytest.fixture(scope="module")
def fleet_broker():
    import harness

    broker = harness.start_broker_or_fail(bench_fleet.BROKER_CONF, name="fleet")
    broker.wait_coordinators_ready()
    yield broker
    harness.release_broker(broker)


@pytest.fixture(scope="module")
def measured(fleet_broker, tmp_path_factory):
    lines = []

    def out(line: str) -> None:
        lines.append(line)
        print(line, flush=True)

    result = bench_fleet.run(fleet_broker, SIZES, tmp_path_factory.mktemp("fleet"), out=out)
    result["lines"] = lines
    return result


@pytest.mark.timeout(1200)
def test_every_command_ran_and_saw_every_subscription_the_broker_lists(measured):
    for row in measured["rows"]:
        what = f"{row['command']} at {row['size']}: {row['stderr']}"
        assert row["ok"], what
        # the broker's own listing: the fleet it holds, which the command's count and its requests must cover
        assert row["brokerListed"] == row["size"], what
        assert row["seen"] == row["brokerListed"], what
        assert row["partitionsRequested"] == row["brokerListed"], what
        assert row["failedRequests"] == 0, what
        # the doctor ran every check but its downgrade's, which runs only while a downgrade is under way (a
        # checkpoint in the state directory; `downgrade check` here keeps its own, --checkpoint FILE)
        assert [c for c in row["notRun"] if c["check"] != "downgrade"] == [], what
        assert row["requests"] >= row["size"], what  # at least one request a subscription: it looked at each


@pytest.mark.timeout(300)
def test_the_floor_replayed_the_same_requests_with_the_same_answers(measured):
    for row in measured["rows"]:
        assert row["floorSkipped"] == 0, row  # the commands only read: every request was replayed
        assert row["floorDiffers"] == 0, row
        assert row["floorProcessDiffers"] == 0, row  # the same client, run as its own process


@pytest.mark.timeout(300)
def test_requests_and_time_grow_no_faster_than_the_fleet(measured):
    rows = {(r["command"], r["size"]): r for r in measured["rows"]}
    small, large = SIZES[0], SIZES[-1]
    for name in measured["summary"]:
        per_sub = [rows[name, size]["requests"] / size for size in (small, large)]
        assert per_sub[1] <= 1.05 * per_sub[0], (name, per_sub)
        growth = rows[name, large]["perSubMs"] / rows[name, small]["perSubMs"]
        assert growth <= PER_SUB_GROWTH_BOUND, (name, growth, measured["lines"])


@pytest.mark.timeout(300)
def test_the_brokers_cpu_a_request_was_read(measured):
    """The broker's JVM spent CPU on the command's requests and on the floor's (read from /proc), which the budget a
    client has at 0.8 of the floor's rate is computed from. At the largest size only: /proc counts CPU in 10 ms
    ticks, and the smallest fleet's floor can finish within a few."""
    for row in (r for r in measured["rows"] if r["size"] == SIZES[-1]):
        assert row["brokerCpuMsPerRequest"] > 0 and row["brokerCpuMsPerRequestFloor"] > 0, row
        assert row["floorCpuMsPerRequest"] > 0, row


@pytest.mark.timeout(300)
def test_pulsar_admin_one_jvm_per_call_is_far_slower(measured):
    """The anchor: one pulsar-admin JVM took seconds; the same calls that way take far longer than the command."""
    assert measured["anchorCall"] > 0.2
    for row in measured["rows"]:
        assert row["anchorRatio"] > 10, row


@pytest.mark.timeout(300)
def test_the_tools_admin_layer_costs_at_most_twice_libcurls_bare_loop(measured):
    """The gap to the floor (a bare asyncio client replaying the same requests) is the client's CPU a request. The
    tool's whole admin layer (libcurl through pycurl, retries, redirects, errors, the JSON decoded) against one GET
    through a bare pycurl loop (one handle reused, json.loads): the same request, one at a time, in one process,
    the ways taking turns, each figure the median of five rounds. At most ADMIN_LAYER_BOUND (2.0) times as much:
    today's runs measured 1.51 to 1.83, so a layer half again as costly as today's fails."""
    costs = measured["transport"]
    assert costs["PulsarAdmin"]["cpuMs"] <= ADMIN_LAYER_BOUND * costs["pycurl"]["cpuMs"], costs
