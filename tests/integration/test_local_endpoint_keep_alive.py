"""The local AWS endpoint keeps HTTP connections open between requests, as AWS endpoints do."""

from __future__ import annotations

import http.client
import json
import socket
from collections.abc import Iterator

import boto3
import pytest

from brokersync_local.moto_server import MotoServer
from brokersync_local.world import WorldPorts
from tests.ports import shifted_ports

PORT = shifted_ports(WorldPorts(aws=5305)).aws
_LIST_TABLES = {
    "X-Amz-Target": "DynamoDB_20120810.ListTables",
    "Content-Type": "application/x-amz-json-1.0",
    "Authorization": "AWS4-HMAC-SHA256 Credential=local/20260101/us-east-1/dynamodb/aws4_request, "
    "SignedHeaders=host, Signature=00",
}


@pytest.fixture(scope="module")
def endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MotoServer]:
    with MotoServer(PORT, tmp_path_factory.mktemp("keep-alive")) as server:
        yield server


def _ask(connection: http.client.HTTPConnection, body: bytes = b"{}") -> tuple[int, str | None, bytes]:
    connection.request("POST", "/", body=body, headers=_LIST_TABLES)
    response = connection.getresponse()
    return response.status, response.getheader("Connection"), response.read()


def test_requests_sent_back_to_back_on_one_connection_are_all_answered(endpoint: MotoServer) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", PORT, timeout=10)
    answers = [_ask(connection)]
    local_port = connection.sock.getsockname()[1]
    answers += [_ask(connection) for _ in range(4)]

    assert [(status, header) for status, header, _ in answers] == [(200, None)] * 5
    assert all(json.loads(body) == {"TableNames": []} for _, _, body in answers)
    assert connection.sock.getsockname()[1] == local_port  # the same TCP connection throughout


def test_a_client_that_asks_to_close_gets_the_connection_closed(endpoint: MotoServer) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", PORT, timeout=10)
    connection.request("POST", "/", body=b"{}", headers={**_LIST_TABLES, "Connection": "close"})
    response = connection.getresponse()

    assert response.getheader("Connection") == "close"


def test_a_large_request_body_is_read_whole_and_the_next_request_still_answered(endpoint: MotoServer) -> None:
    dynamodb = boto3.client(
        "dynamodb", region_name="us-east-1", endpoint_url=endpoint.endpoint,
        aws_access_key_id="local", aws_secret_access_key="local",
    )  # fmt: skip
    dynamodb.create_table(
        TableName="keep-alive", BillingMode="PAY_PER_REQUEST",
        KeySchema=[{"AttributeName": "k", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "k", "AttributeType": "S"}],
    )  # fmt: skip
    value = "x" * 300_000
    for n in range(3):
        dynamodb.put_item(TableName="keep-alive", Item={"k": {"S": str(n)}, "v": {"S": value}})

    items = [dynamodb.get_item(TableName="keep-alive", Key={"k": {"S": str(n)}})["Item"] for n in range(3)]

    assert [item["v"]["S"] for item in items] == [value] * 3


def test_a_request_whose_body_falls_short_of_its_length_gets_the_connection_closed(endpoint: MotoServer) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", PORT, timeout=10)
    connection.putrequest("POST", "/")
    for name, value in {**_LIST_TABLES, "Content-Length": "10"}.items():
        connection.putheader(name, value)
    connection.endheaders(b"{}")
    connection.sock.shutdown(socket.SHUT_WR)  # the client is gone before its body is complete

    response = connection.getresponse()

    assert response.getheader("Connection") == "close"


def test_a_chunked_request_is_answered_and_its_connection_closed(endpoint: MotoServer) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", PORT, timeout=10)
    connection.request("POST", "/", body=iter([b"{", b"}"]), headers=_LIST_TABLES, encode_chunked=True)
    response = connection.getresponse()

    assert (response.status, response.getheader("Connection")) == (200, "close")
    assert "TableNames" in json.loads(response.read())  # the body reached the application whole
