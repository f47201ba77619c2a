"""Whatever arrives on the advisory queue or the receipts queue, it becomes a valid record or a
rejection with a reason: never another exception, which would stop the relay's batch.

The frames are built from the real shape with any field replaced by any JSON value, any header
by any text, or the whole body by any bytes: forged input is ordinary traffic.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from brokersync.capture.advisory import parse_consumed_advisory
from brokersync.capture.receipts import parse_receipt
from brokersync.capture.records import ConsumedRecord, RejectedInputError
from brokersync.keys import validate_key, validate_message_id
from brokersync.topology import Topology, load_topology
from tests.unit.capture.advisories import advisory_frame

ROOT = Path(__file__).resolve().parents[3]
#: Loaded once: hypothesis runs each test many times, and the topology is only read.
TOPOLOGY = load_topology(ROOT / "topology.yaml")

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=40),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4),
    max_leaves=12,
)
_QUEUES = st.sampled_from(["ORDERS", "PAYMENTS", "AUDIT", "INVOICES", "", "ORDERS.DR", "orders"])
_TEXT = st.text(max_size=60) | st.sampled_from(
    ["ID:vm-1-2-3:1:1:1:1", "01ARZ3NDEKTSV4RRFFQ69G5FAV", "x' OR '1'='1", "ID:a,b", "queue://PAYMENTS", "brokersync"]
)


def _holds(record: ConsumedRecord, topology: Topology) -> None:
    """What the purge relies on in every record: a known synced queue, a valid key and id, a real time."""
    queue = topology.queue(record.queue)
    assert queue.captures_consumed
    assert validate_key(record.key, record.key_kind) == record.key
    assert record.message_id is not None and validate_message_id(record.message_id) == record.message_id
    assert type(record.consumed_at_ms) is int and record.consumed_at_ms > 0


@st.composite
def _advisories(draw: st.DrawFn) -> tuple[dict[str, str], str | bytes]:
    queue = draw(_QUEUES)
    headers, body = advisory_frame(queue or "ORDERS")
    message: dict[str, Any] = json.loads(body)["ActiveMQTextMessage"]
    for field in draw(st.lists(st.sampled_from([*message, "correlationId", "textView"]), max_size=3)):
        message[field] = draw(_JSON)
    for name in draw(st.lists(st.sampled_from([*headers, "JMSXUserID"]), max_size=3)):
        headers[name] = draw(_TEXT)
    for name in draw(st.lists(st.sampled_from(sorted(headers)), max_size=2)):
        headers.pop(name, None)
    whole = draw(st.sampled_from(["shaped", "any-json", "any-bytes"]))
    if whole == "any-json":
        return headers, json.dumps(draw(_JSON))
    if whole == "any-bytes":
        return headers, draw(st.binary(max_size=80))
    return headers, json.dumps({draw(st.sampled_from(["ActiveMQTextMessage", "ActiveMQMessage", ""])): message})


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(frame=_advisories())
def test_any_advisory_frame_is_a_valid_record_or_a_rejection(frame: Any) -> None:
    headers, body = frame
    try:
        record = parse_consumed_advisory(headers, body, TOPOLOGY, received_at_ms=1_795_342_453_627)
    except RejectedInputError:
        return
    _holds(record, TOPOLOGY)


@st.composite
def _receipts(draw: st.DrawFn) -> str | bytes:
    receipt: dict[str, Any] = {
        "queue": draw(_QUEUES),
        "key": draw(_TEXT),
        "consumedAt": draw(st.integers() | st.floats(allow_nan=False) | st.text(max_size=10) | st.booleans()),
    }
    if draw(st.booleans()):
        receipt["messageId"] = draw(_TEXT | _JSON)
    for field in draw(st.lists(st.sampled_from([*receipt, "extra"]), max_size=2)):
        receipt[field] = draw(_JSON)
    whole = draw(st.sampled_from(["shaped", "shaped", "any-json", "any-bytes"]))
    if whole == "any-json":
        return json.dumps(draw(_JSON))
    if whole == "any-bytes":
        return draw(st.binary(max_size=80))
    return json.dumps(receipt)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=_receipts())
def test_any_receipt_is_a_valid_record_or_a_rejection(data: str | bytes) -> None:
    try:
        record = parse_receipt(data, TOPOLOGY)
    except RejectedInputError:
        return
    _holds(record, TOPOLOGY)
