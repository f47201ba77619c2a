"""Receipts: the documented JSON schema, and a reason for every refusal."""

from __future__ import annotations

import json

import pytest

from brokersync.capture.receipts import MAX_RECEIPT_BYTES, parse_receipt, receipt_json
from brokersync.capture.records import RejectedInputError, RejectReason
from brokersync.keys import MAX_KEY_LENGTH, validate_message_id
from brokersync.topology import MAX_QUEUE_NAME_LENGTH, Queue, Topology
from tests.unit.capture.advisories import MESSAGE_ID, ULID_KEY

#: A consume time: epoch milliseconds, as receipts carry them.
AT = 1_795_342_453_627


def _reason(topology: Topology, data: str | bytes) -> RejectReason:
    with pytest.raises(RejectedInputError) as info:
        parse_receipt(data, topology)
    return info.value.reason


def test_a_receipt_round_trips_through_the_client_serialiser(topology: Topology) -> None:
    record = parse_receipt(receipt_json("ORDERS", ULID_KEY, 1795342453627, MESSAGE_ID), topology)

    assert (record.queue, record.key, record.consumed_at_ms) == ("ORDERS", ULID_KEY, 1795342453627)
    assert record.message_id == MESSAGE_ID


def test_a_ulid_receipt_without_the_consumed_message_id_is_refused(topology: Topology) -> None:
    assert _reason(topology, receipt_json("ORDERS", ULID_KEY, AT)) is RejectReason.MISSING_KEY


def test_a_receipt_whose_message_id_is_not_one_is_refused(topology: Topology) -> None:
    assert _reason(topology, receipt_json("ORDERS", ULID_KEY, AT, MESSAGE_ID + "\n")) is RejectReason.INVALID_KEY


def test_a_message_id_receipt_naming_another_message_is_refused(topology: Topology) -> None:
    other = MESSAGE_ID[:-1] + "9"

    assert _reason(topology, receipt_json("PAYMENTS", MESSAGE_ID, AT, other)) is RejectReason.INVALID_KEY


def test_consumed_at_may_be_iso_8601(topology: Topology) -> None:
    data = json.dumps(
        {"queue": "ORDERS", "key": ULID_KEY, "messageId": MESSAGE_ID, "consumedAt": "2026-11-22T10:00:00.123Z"}
    )

    assert parse_receipt(data, topology).consumed_at_ms == 1795341600123


@pytest.mark.parametrize(
    ("consumed_at", "ms"),
    [(1795342453627.0, 1795342453627), (1795342453627.9, 1795342453627), ("1795342453627", 1795342453627)],
    ids=["float", "float-with-a-fraction", "digits-as-text"],
)
def test_consumed_at_may_be_epoch_ms_as_a_float_or_as_text(
    topology: Topology, consumed_at: float | str, ms: int
) -> None:
    """What ``time.time() * 1000`` and clients that send every field as text produce: floored to the ms."""
    data = json.dumps({"queue": "ORDERS", "key": ULID_KEY, "messageId": MESSAGE_ID, "consumedAt": consumed_at})

    assert parse_receipt(data, topology).consumed_at_ms == ms


def test_a_message_id_receipt_on_a_message_id_queue(topology: Topology) -> None:
    record = parse_receipt(receipt_json("PAYMENTS", MESSAGE_ID, AT), topology)

    assert (record.key_kind, record.message_id) == ("message-id", MESSAGE_ID)


def test_a_receipt_at_the_longest_queue_name_and_message_id_is_recorded(topology: Topology) -> None:
    queue = "Q" * MAX_QUEUE_NAME_LENGTH
    longest = f"ID:{'h' * 200}-{'9' * 10}-{'9' * 19}-{'9' * 10}:{'9' * 10}" + f":-{'9' * 19}" * 3
    wide = topology.model_copy(update={"queues": [*topology.queues, Queue(name=queue, sync_key="message-id")]})

    record = parse_receipt(receipt_json(queue, longest, AT), wide)

    assert len(validate_message_id(longest)) == MAX_KEY_LENGTH
    assert (record.queue, record.key) == (queue, longest)


def test_an_oversized_receipt_is_refused_before_parsing(topology: Topology) -> None:
    assert _reason(topology, "x" * (MAX_RECEIPT_BYTES + 1)) is RejectReason.OVERSIZED


@pytest.mark.parametrize(
    "data",
    [
        "{",
        '{"queue": "ORDERS"}',
        json.dumps({"queue": "ORDERS", "key": ULID_KEY, "messageId": MESSAGE_ID, "consumedAt": True}),
        json.dumps({"queue": "ORDERS", "key": ULID_KEY, "messageId": MESSAGE_ID, "consumedAt": 1_795_342_453}),
        json.dumps({"queue": "ORDERS", "key": ULID_KEY, "messageId": MESSAGE_ID, "consumedAt": 10**40}),
        json.dumps({"queue": "ORDERS", "key": ULID_KEY, "messageId": MESSAGE_ID, "consumedAt": 1_795_342_453.5}),
        json.dumps({"queue": "ORDERS", "key": ULID_KEY, "messageId": MESSAGE_ID, "consumedAt": "1795342453"}),
        f'{{"queue": "ORDERS", "key": "{ULID_KEY}", "messageId": "{MESSAGE_ID}", "consumedAt": NaN}}',
        f'{{"queue": "ORDERS", "key": "{ULID_KEY}", "messageId": "{MESSAGE_ID}", "consumedAt": Infinity}}',
        json.dumps({"queue": "ORDERS", "key": ULID_KEY, "messageId": MESSAGE_ID, "consumedAt": "1970-01-01T00:00:01Z"}),
        f'{{"queue": "ORDERS", "key": "{ULID_KEY}", "messageId": "{MESSAGE_ID}", "messageId": "{MESSAGE_ID[:-1]}8",'
        f' "consumedAt": {AT}}}',
        f'{{"queue": "ORDERS", "queue": "PAYMENTS", "key": "{ULID_KEY}", "messageId": "{MESSAGE_ID}",'
        f' "consumedAt": {AT}}}',
        "[]",
        b'{"queue": "\xff"}',
        receipt_json("ORDERS", ULID_KEY, AT, MESSAGE_ID).encode("utf-16"),
        b"\xef\xbb\xbf" + receipt_json("ORDERS", ULID_KEY, AT, MESSAGE_ID).encode(),
    ],
    ids=[
        "unclosed",
        "no-key",
        "time-a-bool",
        "time-in-seconds",
        "time-past-2100",
        "time-in-seconds-as-a-float",
        "time-in-seconds-as-text",
        "time-nan",
        "time-infinite",
        "time-before-2000",
        "message-id-twice",
        "queue-twice",
        "not-an-object",
        "not-utf8",
        "utf16",
        "utf8-bom",
    ],
)
def test_a_malformed_receipt_is_refused(topology: Topology, data: str | bytes) -> None:
    assert _reason(topology, data) is RejectReason.MALFORMED


def test_a_key_of_the_wrong_kind_for_the_queue_is_refused(topology: Topology) -> None:
    assert _reason(topology, receipt_json("ORDERS", MESSAGE_ID, AT)) is RejectReason.INVALID_KEY


def test_a_non_ulid_key_is_refused(topology: Topology) -> None:
    assert _reason(topology, receipt_json("ORDERS", "order-42", AT)) is RejectReason.INVALID_KEY


def test_an_unknown_queue_is_refused(topology: Topology) -> None:
    assert _reason(topology, receipt_json("INVOICES", ULID_KEY, AT)) is RejectReason.UNKNOWN_QUEUE
