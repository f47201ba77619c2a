"""Consumed-advisory frames shaped exactly like ActiveMQ 5.17 sends them over STOMP.

Captured from a real broker (jms-advisory-json transformation) and trimmed of the
marshalled-properties blob, which the relay never reads.
"""

from __future__ import annotations

import json
from typing import Any

ULID_KEY = "01JD5Z8K3M4N5P6Q7R8S9T0V1W"
MESSAGE_ID = "ID:vm-40237-1795342445090-7:1:-1:1:1"


def advisory_frame(
    queue: str = "ORDERS",
    correlation_id: str | None = ULID_KEY,
    message_id: str | None = MESSAGE_ID,
    broker_out_time: int = 1795342453627,
) -> tuple[dict[str, str], str]:
    message: dict[str, Any] = {
        "commandId": 3,
        "messageId": {"producerId": {"connectionId": "ID:vm-40237-1795342445090-7:1", "sessionId": -1, "value": 1}},
        "destination": {"@class": "ActiveMQQueue", "string": queue, "null": ""},
        "timestamp": broker_out_time - 27,
        "brokerInTime": broker_out_time - 22,
        "brokerOutTime": broker_out_time,
        "persistent": True,
        "redeliveryCounter": 0,
        "size": 1050,
    }
    if correlation_id is not None:
        message["correlationId"] = correlation_id
    headers = {
        "destination": "/queue/BROKERSYNC.CONSUMED",
        "original-destination": f"/topic/ActiveMQ.Advisory.MessageConsumed.Queue.{queue}",
        "orignalDestination": f"queue://{queue}",
        "type": "Advisory",
        "timestamp": "0",
        "message-id": "ID:vm-40237-1795342445090-1:1:0:0:6",
        "originBrokerName": "primary",
    }
    if message_id is not None:
        headers["orignalMessageId"] = message_id
    return headers, json.dumps({"ActiveMQTextMessage": message})
