"""What one ledger request costs the process that makes it, layer by layer.

The relay and the purge spend most of their CPU per DynamoDB request (decisions 0033, 0045,
0046). This bench measures that cost in its own process against moto in server mode on
loopback, where the sync bench's processes send theirs, with ``time.process_time`` (this
process only; moto's work is another process's):

* **the ledger's own requests**, made by the ledger backend as the relay and the purge make
  them, on items of ``--elements`` binary set elements: the relay's capture write
  (``UpdateItem`` asking for the item back) and pointer (``PutItem``), the purge's marks write
  (``UpdateItem`` asking for nothing), its read (one ``BatchGetItem`` of 8 capture and 8 marks
  items) and its pointer delete (``DeleteItem``);
* **the layers of one small request** (a ``GetItem`` of a missing item): pynamodb and botocore
  whole, and with the HTTP exchange answered in process (what a request costs before any
  byte is sent); botocore's HTTP session, urllib3's connection pool and http.client each
  sending the same signed request; and signing it alone. They bound what a DynamoDB client of
  our own could save per request.

    .venv/bin/python bench/ledger_requests.py [--elements 250] [--requests 300] [--repeat 3]
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import boto3
import urllib3
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest, AWSResponse

from brokersync.ledger.backend import ItemRef, KeySets, Marks, Pointer
from brokersync.ledger.dynamodb import DynamoDBBackend, ledger_model
from brokersync.ledger.schema import create_ledger_table
from brokersync_ci import bench_results
from brokersync_local.moto_server import MotoServer
from brokersync_local.ports import free_port

ROOT = Path(__file__).resolve().parents[1]
TABLE = "brokersync-bench-requests"
REGION = "us-east-1"
EXPIRES = 4_000_000_000
READ_ITEMS = 8
READ_REFS = [ItemRef(0, r) for r in range(READ_ITEMS)]


def _cpu_ms_per_call(call: Callable[[int], object], count: int) -> float:
    for i in range(min(20, count)):  # connections open, caches warm
        call(i)
    started = time.process_time()
    for i in range(count):
        call(i)
    return round((time.process_time() - started) / count * 1000, 4)


def _ledger_requests(endpoint: str, elements: int, count: int, run: int) -> dict[str, float]:
    backend = DynamoDBBackend(ledger_model(TABLE, REGION, endpoint))
    sets = [KeySets({os.urandom(38) for _ in range(elements)}) for _ in range(count + 20)]
    queue = f"q{run}"
    for ref in range(READ_ITEMS):
        backend.add_marks(queue, ItemRef(0, ref), Marks(purged=sets[ref]), EXPIRES)
    pointer = Pointer(sk="0000000000000#bench", refs=(ItemRef(0, 0),), counts=(elements,))
    return {
        "capture_write": _cpu_ms_per_call(
            lambda i: backend.add_captured(queue, ItemRef(0, i), sets[i], EXPIRES), count
        ),
        "pointer_put": _cpu_ms_per_call(lambda _i: backend.put_pointer(queue, pointer, EXPIRES), count),
        "marks_write": _cpu_ms_per_call(
            lambda i: backend.add_marks(queue, ItemRef(1, i), Marks(purged=sets[i]), EXPIRES), count
        ),
        "purge_read": _cpu_ms_per_call(lambda _i: backend.captured_and_marks(queue, READ_REFS), count),
        "pointer_delete": _cpu_ms_per_call(lambda _i: backend.delete_pointer(queue, pointer.sk), count),
    }


def _signed_get(endpoint: str, credentials: Any) -> AWSRequest:
    body = json.dumps({"TableName": TABLE, "Key": {"pk": {"S": "none"}, "sk": {"S": "none"}}}).encode()
    request = AWSRequest(
        "POST",
        endpoint + "/",
        data=body,
        headers={"Content-Type": "application/x-amz-json-1.0", "X-Amz-Target": "DynamoDB_20120810.GetItem"},
    )
    SigV4Auth(credentials, "dynamodb", REGION).add_auth(request)
    return request


class _Answered:
    """The HTTP exchange answered in process: what a request costs before and after the wire."""

    body = json.dumps({"ConsumedCapacity": {"TableName": TABLE, "CapacityUnits": 0.5}}).encode()

    def stream(self, *_args: Any, **_kwargs: Any) -> Any:
        yield self.body


def _layers(endpoint: str, count: int) -> dict[str, float]:
    model = ledger_model(TABLE, REGION, endpoint)
    client = model._get_connection().connection.client
    credentials = boto3.session.Session().get_credentials().get_frozen_credentials()
    prepared = _signed_get(endpoint, credentials).prepare()
    headers = dict(prepared.headers.items())
    host, port = endpoint.removeprefix("http://").split(":")
    pool = urllib3.HTTPConnectionPool(host, int(port), maxsize=1)
    direct = http.client.HTTPConnection(host, int(port))

    def by_http_client(_i: int) -> None:
        direct.request("POST", "/", body=prepared.body, headers=headers)
        direct.getresponse().read()

    def sign(_i: int) -> None:
        _signed_get(endpoint, credentials)

    figures = {
        "pynamodb_and_botocore_whole": _cpu_ms_per_call(lambda _i: _get(model), count),
        "botocore_http_session": _cpu_ms_per_call(
            lambda _i: client._endpoint.http_session.send(prepared).content, count
        ),
        "urllib3_pool": _cpu_ms_per_call(
            lambda _i: pool.urlopen("POST", "/", body=prepared.body, headers=headers, retries=False).data, count
        ),
        "http_client": _cpu_ms_per_call(by_http_client, count),
        "sigv4_signing": _cpu_ms_per_call(sign, count),
    }
    client.meta.events.register_first(
        "before-send.dynamodb.GetItem", lambda request, **_: AWSResponse(request.url, 200, {}, _Answered())
    )
    figures["pynamodb_and_botocore_without_http"] = _cpu_ms_per_call(lambda _i: _get(model), count)
    return figures


def _get(model: Any) -> None:
    with contextlib.suppress(model.DoesNotExist):
        model.get("none", "none")


def measure(endpoint: str, elements: int, count: int, run: int) -> dict[str, Any]:
    layers = _layers(endpoint, count * 3)
    return {
        "elements_per_item": elements,
        "requests_per_figure": count,
        "ledger_request_cpu_ms": _ledger_requests(endpoint, elements, count, run),
        "small_request_layers_cpu_ms": layers,
        "botocore_http_over_http_client": round(layers["botocore_http_session"] / layers["http_client"], 2),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--elements", type=int, default=250, help="binary set elements per item (250: a bucket at 1,000 msg/s)"
    )
    parser.add_argument("--requests", type=int, default=300, help="requests per figure (300)")
    bench_results.add_arguments(parser, "ledger_requests", repeat=3)
    args = parser.parse_args()
    if args.elements < 1 or args.requests < 1:
        parser.error("--elements and --requests must be at least 1")
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "bench")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "bench")
    with (
        tempfile.TemporaryDirectory(prefix="brokersync-ledger-requests-") as state,
        MotoServer(free_port(), Path(state) / "aws") as server,
    ):
        create_ledger_table(
            boto3.client("dynamodb", region_name=REGION, endpoint_url=server.endpoint), TABLE, ROOT / "template.yaml"
        )
        runs = iter(range(args.repeat))
        result = bench_results.run_repeated(
            lambda: measure(server.endpoint, args.elements, args.requests, next(runs)),
            args.repeat,
            lambda line: print(line, file=sys.stderr, flush=True),
        )
    return bench_results.finish("ledger_requests", result, args)


if __name__ == "__main__":
    sys.exit(bench_results.exit_code(main))
