"""The relay on the real pair and moto's DynamoDB: every consumed message becomes exactly one key."""

from __future__ import annotations

import threading
import time

import pytest
from ulid import ULID

from brokersync.broker.statistics import StatisticsClient
from brokersync.broker.stomp import StompConnector
from brokersync.capture.audit import CaptureAudit
from brokersync.capture.records import ConsumedRecord
from brokersync.capture.relay import AdvisoryRelay, RelayReport, RelaySettings
from brokersync.capture.writer import LedgerWriter, RetryPolicy, WriteResult
from brokersync.ledger import Ledger, LedgerUnavailableError
from brokersync.metrics import RecordingMetrics
from brokersync.topology import CONSUMED_QUEUE, PARKED_QUEUE, Topology
from brokersync_local.backlog import wait_until
from brokersync_local.world import LocalWorld
from tests.integration.stomp_helpers import receive, send

pytestmark = pytest.mark.broker
FAST = RelaySettings(batch_size=100, flush_interval_s=0.1, prefetch=200, stall_timeout_s=5)
FOREVER = 10**14


def _produce_and_consume(primary: StompConnector, queue: str, count: int) -> list[str]:
    keys = [str(ULID()) for _ in range(count)]
    connection = primary.connect(name="test-producer")
    for key in keys:
        connection.send(f"/queue/{queue}", "body", headers={"correlation-id": key, "persistent": "true"})
    connection.disconnect()
    assert len(receive(primary, queue, count, timeout_s=20)) == count
    return keys


def _relay(topology: Topology, primary: StompConnector, ledger: Ledger, **extra: object) -> AdvisoryRelay:
    return AdvisoryRelay(primary, LedgerWriter(ledger), topology, settings=FAST, **extra)  # type: ignore[arg-type]


def test_every_message_consumed_on_the_primary_is_exactly_one_ledger_key(
    topology: Topology, primary: StompConnector, ledger: Ledger
) -> None:
    keys = _produce_and_consume(primary, "ORDERS", 200)

    report = _relay(topology, primary, ledger).run(max_seconds=4)

    assert report.captured == 200
    assert sorted(ledger.consumed_between("ORDERS", 0, FOREVER)) == sorted(keys)


class _CrashAfterWrite(LedgerWriter):
    """Writes, then dies before the relay can ack: the crash the relay's ordering exists for."""

    def write(self, records: list[ConsumedRecord]) -> WriteResult:  # type: ignore[override]
        super().write(records)
        raise KeyboardInterrupt("relay killed between ledger write and ack")


def test_a_relay_killed_between_write_and_ack_leaves_exactly_n_keys_after_restart(
    topology: Topology, primary: StompConnector, ledger: Ledger
) -> None:
    keys = _produce_and_consume(primary, "ORDERS", 150)
    doomed = AdvisoryRelay(primary, _CrashAfterWrite(ledger), topology, settings=FAST)
    with pytest.raises(KeyboardInterrupt):
        doomed.run(max_seconds=4)

    report = _relay(topology, primary, ledger).run(max_seconds=4)

    assert report.captured == 150, "the unacked advisories were redelivered"
    assert sorted(ledger.consumed_between("ORDERS", 0, FOREVER)) == sorted(keys)


def test_message_id_queues_are_keyed_by_the_consumed_message_id(
    topology: Topology, primary: StompConnector, ledger: Ledger
) -> None:
    send(primary, "PAYMENTS", "pay", {})
    [consumed] = receive(primary, "PAYMENTS", 1)

    _relay(topology, primary, ledger).run(max_seconds=3)

    assert ledger.consumed_between("PAYMENTS", 0, FOREVER) == [consumed.headers["message-id"]]


def test_an_advisory_without_a_key_is_parked_with_its_reason_not_dropped(
    topology: Topology, primary: StompConnector, ledger: Ledger
) -> None:
    send(primary, "ORDERS", "no correlation id", {})
    assert len(receive(primary, "ORDERS", 1)) == 1
    metrics = RecordingMetrics()

    report = _relay(topology, primary, ledger, metrics=metrics).run(max_seconds=3)

    [parked] = receive(primary, PARKED_QUEUE, 1)
    assert report.parked == {"missing-key": 1}
    assert parked.headers["brokersync-reason"] == "missing-key"
    assert metrics.total("Parked") == 1
    assert ledger.consumed_between("ORDERS", 0, FOREVER) == []


def test_advisories_lost_in_a_primary_restart_are_reported_not_hidden(
    world: LocalWorld, topology: Topology, primary: StompConnector, ledger: Ledger
) -> None:
    metrics = RecordingMetrics()
    statistics = StatisticsClient(primary)
    audit = CaptureAudit(ledger.backend, statistics, topology, metrics=metrics)  # type: ignore[arg-type]
    # Earlier tests consumed on this incarnation too, into ledgers of their own: none of those
    # were captured into this test's ledger, so they count as missing here as well.
    earlier = statistics.queue_stats(["ORDERS"])["ORDERS"].dequeue_count
    _produce_and_consume(primary, "ORDERS", 40)
    before = {f.broker_id: f for f in audit.check() if f.queue == "ORDERS"}
    assert [f.final for f in before.values()] == [False]

    world.brokers["primary"].stop()
    world.start_broker("primary").wait_ready()
    world.wait_for_bridges(time.monotonic() + 30)
    _relay(topology, primary, ledger, audit=audit).run(max_seconds=2)
    findings = [f for f in audit.check() if f.queue == "ORDERS" and f.final]

    lost = earlier + 40
    assert [(f.dequeued, f.captured, f.missing) for f in findings] == [(lost, 0, lost)]
    assert metrics.total("AdvisoriesLost") >= lost
    reported = metrics.total("AdvisoriesLost")
    audit.check()
    assert metrics.total("AdvisoriesLost") == reported, "a loss is reported once"


class _DownLedger:
    """A table that stays throttled through every retry."""

    def record(self, queue: str, entries: object) -> None:
        raise LedgerUnavailableError("ProvisionedThroughputExceededException")


def test_a_table_that_stays_down_leaves_every_advisory_unacked_on_the_broker(
    topology: Topology, primary: StompConnector, primary_stats: StatisticsClient
) -> None:
    _produce_and_consume(primary, "ORDERS", 30)
    writer = LedgerWriter(_DownLedger(), policy=RetryPolicy(attempts=2, base_delay_s=0.01))  # type: ignore[arg-type]

    with pytest.raises(LedgerUnavailableError):
        AdvisoryRelay(primary, writer, topology, settings=FAST).run(max_seconds=3)

    def held() -> int:
        return primary_stats.queue_stats([CONSUMED_QUEUE])[CONSUMED_QUEUE].size

    wait_until(lambda: held() >= 30, 10, "every advisory back on the broker")
    time.sleep(0.5)  # and none taken away later (an ACK the relay sent on its way out)
    assert held() == 30


def _run_in_thread(relay: AdvisoryRelay, **kwargs: float) -> tuple[threading.Thread, dict[str, object]]:
    outcome: dict[str, object] = {}

    def run() -> None:
        outcome["report"] = relay.run(**kwargs)  # type: ignore[arg-type]
        outcome["ended_at"] = time.monotonic()

    thread = threading.Thread(target=run, name="test-relay")
    thread.start()
    return thread, outcome


def test_a_relay_past_its_time_relays_on_until_the_next_one_consumes_then_leaves(
    topology: Topology, primary: StompConnector, ledger: Ledger
) -> None:
    """No advisory waits between two scheduled invocations (decision 0039): what is consumed
    after the first one's time, before the second subscribes, is relayed by the first."""
    statistics = StatisticsClient(primary)
    first, first_outcome = _run_in_thread(
        _relay(topology, primary, ledger, statistics=statistics), max_seconds=1.0, hand_over_s=20.0
    )
    time.sleep(2.0)
    between = _produce_and_consume(primary, "ORDERS", 30)
    wait_until(lambda: len(ledger.consumed_between("ORDERS", 0, FOREVER)) == 30, timeout_s=10, what="the first relay")
    assert first.is_alive(), "the first relay is still waiting for the next one"

    second_started = time.monotonic()
    second, second_outcome = _run_in_thread(_relay(topology, primary, ledger, statistics=statistics), max_seconds=6.0)
    first.join(timeout=15)
    after = _produce_and_consume(primary, "ORDERS", 30)
    second.join(timeout=20)

    report = first_outcome["report"]
    assert isinstance(report, RelayReport)
    assert report.handed_over and report.captured == 30
    assert float(first_outcome["ended_at"]) - second_started < 5.0  # type: ignore[arg-type]
    assert sorted(ledger.consumed_between("ORDERS", 0, FOREVER)) == sorted(between + after)
    assert isinstance(second_outcome["report"], RelayReport)


def test_a_relay_whose_successor_never_comes_leaves_at_its_bound_and_says_so(
    topology: Topology, primary: StompConnector, ledger: Ledger
) -> None:
    metrics = RecordingMetrics()
    relay = _relay(topology, primary, ledger, statistics=StatisticsClient(primary), metrics=metrics)
    started = time.monotonic()

    report = relay.run(max_seconds=1.0, hand_over_s=3.0)

    assert 3.5 <= time.monotonic() - started < 8.0
    assert not report.handed_over and report.hand_over_s >= 3.0
    assert metrics.total("RelayHandoverMissed") == 1


def test_a_relay_stopped_while_handing_over_leaves_at_once_without_a_missed_hand_over(
    topology: Topology, primary: StompConnector, ledger: Ledger
) -> None:
    """A transition's stop (the role record moved) ends the wait: the next one may never come."""
    metrics = RecordingMetrics()
    stop = threading.Event()
    relay = _relay(topology, primary, ledger, statistics=StatisticsClient(primary), metrics=metrics)
    threading.Timer(2.0, stop.set).start()
    started = time.monotonic()

    report = relay.run(max_seconds=1.0, stop=stop, hand_over_s=30.0)

    assert time.monotonic() - started < 5.0
    assert not report.handed_over
    assert metrics.total("RelayHandoverMissed") == 0
