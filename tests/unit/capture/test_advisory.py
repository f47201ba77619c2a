"""Consumed advisories become ledger records; anything else is rejected with a reason, never dropped."""

from __future__ import annotations

import json

import pytest

from brokersync.capture.advisory import parse_consumed_advisory
from brokersync.capture.records import RejectedInputError, RejectReason
from brokersync.topology import Topology
from tests.unit.capture.advisories import MESSAGE_ID, ULID_KEY, advisory_frame


def _reason(topology: Topology, headers: dict[str, str], body: str) -> RejectReason:
    with pytest.raises(RejectedInputError) as info:
        parse_consumed_advisory(headers, body, topology)
    return info.value.reason


def test_a_correlation_id_queue_is_keyed_by_the_ulid(topology: Topology) -> None:
    record = parse_consumed_advisory(*advisory_frame("ORDERS"), topology)

    assert (record.queue, record.key, record.key_kind) == ("ORDERS", ULID_KEY, "correlation-id")
    assert record.message_id == MESSAGE_ID


def test_the_consume_time_is_the_brokers_dispatch_time(topology: Topology) -> None:
    record = parse_consumed_advisory(*advisory_frame(broker_out_time=1795342453627), topology)

    assert record.consumed_at_ms == 1795342453627


@pytest.mark.parametrize("forged", [True, 10**40, 1_795_342_453, -5], ids=["bool", "10**40", "seconds", "negative"])
def test_a_dispatch_time_that_is_no_epoch_millisecond_gives_way_to_the_next(topology: Topology, forged: object) -> None:
    headers, body = advisory_frame(broker_out_time=1795342453627)
    document = json.loads(body)
    document["ActiveMQTextMessage"]["brokerOutTime"] = forged

    record = parse_consumed_advisory(headers, json.dumps(document), topology)

    assert record.consumed_at_ms == 1795342453627 - 22  # brokerInTime


def test_an_advisory_with_no_usable_time_is_rejected_as_malformed(topology: Topology) -> None:
    headers, body = advisory_frame()
    document = json.loads(body)
    document["ActiveMQTextMessage"].update(brokerOutTime=True, brokerInTime=0, timestamp=10**40)

    assert _reason(topology, headers, json.dumps(document)) is RejectReason.MALFORMED


def test_a_message_id_queue_is_keyed_by_the_original_message_id(topology: Topology) -> None:
    record = parse_consumed_advisory(*advisory_frame("PAYMENTS", correlation_id=None), topology)

    assert (record.key, record.key_kind) == (MESSAGE_ID, "message-id")


def test_a_lower_case_ulid_is_normalised(topology: Topology) -> None:
    record = parse_consumed_advisory(*advisory_frame(correlation_id=ULID_KEY.lower()), topology)

    assert record.key == ULID_KEY


def test_a_missing_correlation_id_is_rejected_as_missing_key(topology: Topology) -> None:
    assert _reason(topology, *advisory_frame(correlation_id=None)) is RejectReason.MISSING_KEY


def test_a_missing_correlation_id_falls_back_to_the_message_id_when_the_queue_allows_it(topology: Topology) -> None:
    queues = [q.model_copy(update={"message_id_fallback": q.name == "ORDERS"}) for q in topology.queues]
    lenient = topology.model_copy(update={"queues": queues})

    record = parse_consumed_advisory(*advisory_frame(correlation_id=None), lenient)

    assert (record.key, record.key_kind) == (MESSAGE_ID, "message-id")


def test_a_non_ulid_correlation_id_is_rejected_as_invalid_key(topology: Topology) -> None:
    assert _reason(topology, *advisory_frame(correlation_id="order-42")) is RejectReason.INVALID_KEY


def test_a_selector_injection_attempt_is_rejected_as_invalid_key(topology: Topology) -> None:
    headers, body = advisory_frame("PAYMENTS", message_id="ID:x' OR JMSMessageID LIKE '%")

    assert _reason(topology, headers, body) is RejectReason.INVALID_KEY


def test_an_unknown_queue_is_rejected(topology: Topology) -> None:
    assert _reason(topology, *advisory_frame("INVOICES")) is RejectReason.UNKNOWN_QUEUE


def test_a_mirror_queue_raises_no_record(topology: Topology) -> None:
    assert _reason(topology, *advisory_frame("AUDIT")) is RejectReason.NOT_CAPTURED


@pytest.mark.parametrize(
    "body",
    ["not json", "[]", '{"a": 1, "b": 2}', '{"ActiveMQTextMessage": 3}', b"\xff\xfe", "[" * 100_000 + "]" * 100_000],
    ids=["text", "list", "two-keys", "not-an-object", "not-utf8", "nested-past-the-parser"],
)
def test_a_malformed_body_is_rejected_as_malformed(topology: Topology, body: str) -> None:
    headers, _ = advisory_frame()

    assert _reason(topology, headers, body) is RejectReason.MALFORMED


def test_the_queue_comes_from_the_body_when_the_header_is_missing(topology: Topology) -> None:
    headers, body = advisory_frame("ORDERS")
    del headers["orignalDestination"]

    assert parse_consumed_advisory(headers, body, topology).queue == "ORDERS"


@pytest.mark.parametrize("header", [None, "", "not-an-id", "ID:host-1-1700000000000-1:1:-1:1:1\n"])
def test_an_advisory_without_a_well_formed_message_id_is_rejected(topology: Topology, header: str | None) -> None:
    headers, body = advisory_frame("ORDERS")
    if header is None:
        del headers["orignalMessageId"]
    else:
        headers["orignalMessageId"] = header

    assert _reason(topology, headers, body) in (RejectReason.MISSING_KEY, RejectReason.INVALID_KEY)


@pytest.mark.parametrize("correlation_id", [ULID_KEY + "\n", "\u0131" + ULID_KEY[1:], 42])
def test_a_correlation_id_that_only_looks_like_a_ulid_is_rejected(topology: Topology, correlation_id: object) -> None:
    assert _reason(topology, *advisory_frame(correlation_id=correlation_id)) is RejectReason.INVALID_KEY


def test_an_advisory_a_client_sent_is_rejected_as_forged(topology: Topology) -> None:
    headers, body = advisory_frame("ORDERS")
    headers["JMSXUserID"] = "app"

    assert _reason(topology, headers, body) is RejectReason.FORGED


def test_an_expired_advisory_is_a_departure_timed_when_the_relay_received_it(topology: Topology) -> None:
    headers, body = advisory_frame("ORDERS")
    headers["original-destination"] = "/topic/ActiveMQ.Advisory.Expired.Queue.ORDERS"

    record = parse_consumed_advisory(headers, body, topology, received_at_ms=1795350000000)

    assert (record.departure, record.consumed_at_ms, record.message_id) == ("expired", 1795350000000, MESSAGE_ID)


def test_a_dlq_advisory_names_the_message_by_the_id_its_body_describes(topology: Topology) -> None:
    headers, body = advisory_frame("ORDERS")
    headers["original-destination"] = "/topic/ActiveMQ.Advisory.MessageDLQd.Queue.ORDERS"
    del headers["orignalMessageId"]
    document = json.loads(body)
    (message,) = document.values()
    message["messageId"] = {
        "producerId": {"connectionId": "ID:vm-40237-1795342445090-7:1", "sessionId": -1, "value": 1},
        "producerSequenceId": 5,
    }

    record = parse_consumed_advisory(headers, json.dumps(document), topology, received_at_ms=1795350000000)

    assert (record.departure, record.message_id) == ("dead-lettered", "ID:vm-40237-1795342445090-7:1:-1:1:5")


def test_a_dlq_advisory_whose_body_names_no_message_is_rejected(topology: Topology) -> None:
    headers, body = advisory_frame("ORDERS")
    headers["original-destination"] = "/topic/ActiveMQ.Advisory.MessageDLQd.Queue.ORDERS"
    del headers["orignalMessageId"]

    assert _reason(topology, headers, body) is RejectReason.MISSING_KEY


def test_an_id_its_client_set_is_rejected_as_client_set_id(topology: Topology) -> None:
    """ActiveMQ's ``textView``: the AMQP transport sets it from every AMQP message-id, and it may
    name another message (here, the one the header names)."""
    headers, body = advisory_frame()
    document = json.loads(body)
    document["ActiveMQTextMessage"]["messageId"]["textView"] = MESSAGE_ID

    assert _reason(topology, headers, json.dumps(document)) is RejectReason.CLIENT_SET_ID
