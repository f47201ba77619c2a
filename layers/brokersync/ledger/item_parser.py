"""Reading DynamoDB's item responses in one JSON pass, for the ledger's hot path.

botocore parses a JSON-protocol response by walking the operation's output shape value by
value: for a ledger item that is a shape lookup, a handler call and a base64 decode per set
element, and an item holds one element per key of its bucket (about 250 at 1,000 msg/s).
The relay reads a capture item back after each write and the purge reads capture and marks
items every round; read in one pass, the purge's read costs it 0.60-0.65 of the CPU the walk
did (decision 0046, ``bench/ledger_requests.py``).

For the item operations the walk does one thing ``json.loads`` does not: it turns the
base64 text of ``B`` and ``BS`` attribute values into bytes (their outputs hold no
timestamps, and numbers stay JSON's). An attribute value is the only object in these
outputs whose one key is ``B`` with a string or ``BS`` with a list of strings (an item's
own attributes map names to objects, never to strings), so an ``object_hook`` that
decodes exactly those objects gives what botocore gives. Everything else (errors, other
operations, retries, signing, sending) stays botocore's: the parser is botocore's JSON
parser with only the body pass replaced, installed through the session's
``response_parser_factory`` component.
"""

from __future__ import annotations

import binascii
import json
from typing import Any

from botocore.parsers import JSONParser, ResponseParserError, ResponseParserFactory

#: Output shapes of the operations whose bodies are items, keys and capacity only.
ITEM_OUTPUTS = frozenset(
    {
        "GetItemOutput",
        "PutItemOutput",
        "UpdateItemOutput",
        "DeleteItemOutput",
        "QueryOutput",
        "ScanOutput",
        "BatchGetItemOutput",
        "BatchWriteItemOutput",
    }
)


def _decode(text: str) -> bytes:
    try:
        return binascii.a2b_base64(text)  # what botocore's blob parser does, without its bytes copy
    except (binascii.Error, ValueError) as e:  # ValueError: text that is not ASCII
        raise ResponseParserError(f"binary attribute value is not base64: {e}") from e


def _attribute_value(document: dict[str, Any]) -> Any:
    """``object_hook``: a ``B``/``BS`` attribute value with its bytes decoded, anything else as is."""
    if len(document) == 1:
        if type(value := document.get("B")) is str:
            return {"B": _decode(value)}
        if type(values := document.get("BS")) is list and all(type(v) is str for v in values):
            return {"BS": [_decode(v) for v in values]}
    return document


def parse_item_body(body: bytes) -> dict[str, Any]:
    """An item operation's JSON body as botocore's walk would leave it (an empty body is ``{}``)."""
    if not body:
        return {}
    try:
        parsed = json.loads(body, object_hook=_attribute_value)
    except (ValueError, RecursionError) as e:
        raise ResponseParserError(f"DynamoDB response is not JSON: {e}") from e
    if not isinstance(parsed, dict):
        raise ResponseParserError("DynamoDB response is not a JSON object")
    return parsed


class ItemResponseParser(JSONParser):
    """botocore's JSON parser, with item operations' bodies read in one pass."""

    def _handle_json_body(self, raw_body: bytes, shape: Any) -> Any:
        if shape is not None and shape.name in ITEM_OUTPUTS:
            return parse_item_body(raw_body)
        return super()._handle_json_body(raw_body, shape)


class ItemResponseParserFactory(ResponseParserFactory):
    """The factory a botocore session hands its clients: ours for JSON, botocore's otherwise."""

    def create_parser(self, protocol_name: str) -> Any:
        if protocol_name == "json":
            return ItemResponseParser(**self._defaults)
        return super().create_parser(protocol_name)
