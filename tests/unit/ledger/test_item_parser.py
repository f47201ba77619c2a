"""The one-pass item parser gives what botocore's shape walk gives, and is what the ledger's client uses."""

from __future__ import annotations

import base64
import json
import time
from typing import Any

import boto3
import botocore.session
import pytest
from botocore.parsers import JSONParser, ResponseParserError
from hypothesis import example, given, settings
from hypothesis import strategies as st
from moto import mock_aws
from ulid import ULID

from brokersync.ledger import dynamodb_ledger
from brokersync.ledger.item_parser import ITEM_OUTPUTS, ItemResponseParser, ItemResponseParserFactory, parse_item_body
from brokersync.ledger.schema import create_ledger_table

_MODEL = botocore.session.get_session().get_service_model("dynamodb")

_names = st.text(min_size=1, max_size=6)
_numbers = st.integers(-(10**12), 10**12).map(str)
_binary = st.binary(max_size=24)


def _attribute_values() -> st.SearchStrategy[dict[str, Any]]:
    """AttributeValue documents as DynamoDB's JSON carries them (binary as base64 text)."""
    scalar = st.one_of(
        st.builds(lambda s: {"S": s}, st.text(max_size=8)),
        st.builds(lambda n: {"N": n}, _numbers),
        st.builds(lambda b: {"B": base64.b64encode(b).decode()}, _binary),
        st.builds(lambda ss: {"SS": ss}, st.lists(st.text(max_size=6), min_size=1, max_size=4, unique=True)),
        st.builds(lambda ns: {"NS": ns}, st.lists(_numbers, min_size=1, max_size=4, unique=True)),
        st.builds(
            lambda bs: {"BS": [base64.b64encode(b).decode() for b in bs]},
            st.lists(_binary, min_size=1, max_size=4, unique=True),
        ),
        st.builds(lambda b: {"BOOL": b}, st.booleans()),
        st.just({"NULL": True}),
    )
    return st.recursive(
        scalar,
        lambda inner: st.one_of(
            st.builds(lambda m: {"M": m}, st.dictionaries(_names, inner, max_size=3)),
            st.builds(lambda values: {"L": values}, st.lists(inner, max_size=3)),
        ),
        max_leaves=12,
    )


# Items whose attribute names are the attribute value's own type keys are named on purpose.
_items = st.dictionaries(
    st.one_of(_names, st.sampled_from(["B", "BS", "S", "M", "L"])), _attribute_values(), max_size=4
)
_capacity = st.fixed_dictionaries({"TableName": st.just("t"), "CapacityUnits": st.sampled_from([0.5, 1.0, 3.0])})

_responses: dict[str, st.SearchStrategy[dict[str, Any]]] = {
    "GetItem": st.fixed_dictionaries({}, optional={"Item": _items, "ConsumedCapacity": _capacity}),
    "UpdateItem": st.fixed_dictionaries({}, optional={"Attributes": _items, "ConsumedCapacity": _capacity}),
    "Query": st.fixed_dictionaries(
        {"Items": st.lists(_items, max_size=3), "Count": st.integers(0, 3), "ScannedCount": st.integers(0, 3)},
        optional={"LastEvaluatedKey": _items, "ConsumedCapacity": _capacity},
    ),
    "BatchGetItem": st.fixed_dictionaries(
        {
            "Responses": st.dictionaries(st.just("t"), st.lists(_items, max_size=3)),
            "UnprocessedKeys": st.dictionaries(
                st.just("t"), st.fixed_dictionaries({"Keys": st.lists(_items, max_size=2)})
            ),
        }
    ),
}


def _botocore_parse(operation: str, body: bytes) -> dict[str, Any]:
    shape = _MODEL.operation_model(operation).output_shape
    parsed = JSONParser().parse({"body": body, "headers": {}, "status_code": 200}, shape)
    parsed.pop("ResponseMetadata", None)
    return parsed


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(sorted(_responses)).flatmap(lambda op: st.tuples(st.just(op), _responses[op])))
@example(("GetItem", {"Item": {"B": {"B": "AAE="}, "BS": {"BS": ["AAE=", "Ag=="]}}}))
@example(("UpdateItem", {"Attributes": {"x": {"M": {"B": {"S": "not binary"}}}}}))
def test_an_item_response_parses_as_botocore_parses_it(case: tuple[str, dict[str, Any]]) -> None:
    operation, document = case
    body = json.dumps(document).encode()
    assert parse_item_body(body) == _botocore_parse(operation, body)


def test_outputs_taken_in_one_pass_hold_blobs_only_in_attribute_values_and_no_timestamps() -> None:
    """What the one pass does not do, botocore's walk does only for blobs and timestamps."""
    operations = [_MODEL.operation_model(name) for name in _MODEL.operation_names]
    outputs = {op.output_shape.name: op.output_shape for op in operations if op.output_shape is not None}
    for shape_name in ITEM_OUTPUTS:
        assert not _shape_types(outputs[shape_name], set()) & {"blob", "timestamp"}, shape_name


def _shape_types(shape: Any, seen: set[str]) -> set[str]:
    """Every type in ``shape``, not looking inside ``AttributeValue`` (the one pass decodes its blobs)."""
    if shape.name in seen or shape.name == "AttributeValue":
        return set()
    seen.add(shape.name)
    types = {shape.type_name}
    children = [*getattr(shape, "members", {}).values(), *(getattr(shape, a, None) for a in ("member", "key", "value"))]
    for child in children:
        if child is not None:
            types |= _shape_types(child, seen)
    return types


def test_an_empty_body_is_an_empty_response() -> None:
    assert parse_item_body(b"") == {}


@pytest.mark.parametrize(
    "body", [b"not json", b"[1, 2]", b'{"Item": {"k": {"B": "\xc3\xa9"}}}', b'{"Item": {"k": {"B": "A"}}}']
)
def test_a_body_that_is_not_an_item_response_is_a_parser_error(body: bytes) -> None:
    with pytest.raises(ResponseParserError):
        parse_item_body(body)


def test_other_outputs_and_errors_are_left_to_botocore() -> None:
    shape = _MODEL.operation_model("DescribeTable").output_shape
    body = json.dumps({"Table": {"TableName": "t", "CreationDateTime": 1700000000.5}}).encode()
    parsed = ItemResponseParser().parse({"body": body, "headers": {}, "status_code": 200}, shape)
    assert parsed["Table"]["CreationDateTime"].year == 2023  # botocore's walk made it a datetime


def test_the_factory_hands_out_the_item_parser_for_json_only() -> None:
    factory = ItemResponseParserFactory()
    assert isinstance(factory.create_parser("json"), ItemResponseParser)
    assert not isinstance(factory.create_parser("query"), ItemResponseParser)


def test_the_ledger_client_reads_items_in_one_pass(project_root: Any) -> None:
    with mock_aws():
        create_ledger_table(boto3.client("dynamodb", region_name="us-east-1"), "t", project_root / "template.yaml")
        ledger = dynamodb_ledger("t", region="us-east-1")
        client = ledger.backend.model._get_connection().connection.client  # type: ignore[attr-defined]
        assert isinstance(client._endpoint._response_parser_factory, ItemResponseParserFactory)
        key = str(ULID())
        ledger.record("q", [(key, int(time.time() * 1000))])
        assert [p.key for p in ledger.pending("q", read_only=True)] == [key]
