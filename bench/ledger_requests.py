"""What one ledger request costs the process that makes it, layer by layer, and what the one-pass item parser saves.

The relay and the purge spend most of their CPU per DynamoDB request (decisions 0033, 0045).
This bench measures that cost in its own process against moto in server mode on loopback,
where the sync bench's processes send theirs, with ``time.process_time`` (this process only;
moto's work is another process's):

* **ledger calls, side by side**: the relay's capture write (``UpdateItem`` asking for the item
  back) and the purge's read (one ``BatchGetItem`` of 8 capture and 8 marks items), each item
  holding ``--elements`` binary set elements, made by the ledger backend with the one-pass
  item parser (ours, decision 0046) and with botocore's shape walk (the baseline, a client made
  before the parser is installed), alternately, in one run;
* **the layers of one small request** (a ``GetItem`` of a missing item): pynamodb and botocore
  with the HTTP exchange answered in process (what a request costs before any byte is sent),
  botocore's HTTP session, urllib3's connection pool and http.client each sending the same
  signed request, and signing it alone. They bound what a DynamoDB client of our own could
  save per request.

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

from brokersync.ledger.backend import ItemRef, KeySets, Marks
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


def _backend(endpoint: str, *, one_pass: bool) -> DynamoDBBackend:
    model = ledger_model(TABLE, REGION, endpoint)
    if not one_pass:
        model._get_connection().connection.client  # noqa: B018 (made first: it keeps botocore's parser)
    return DynamoDBBackend(model)


def _ledger_calls(endpoint: str, elements: int, count: int, run: int) -> dict[str, dict[str, float]]:
    sets = [KeySets({os.urandom(38) for _ in range(elements)}) for _ in range(count + 20)]
    figures: dict[str, dict[str, float]] = {}
    order = [True, False] if run % 2 == 0 else [False, True]
    for one_pass in order:
        name = "one_pass" if one_pass else "botocore_walk"
        backend = _backend(endpoint, one_pass=one_pass)
        queue = f"q{run}-{name}"
        for ref in range(READ_ITEMS):
            backend.add_marks(queue, ItemRef(0, ref), Marks(purged=sets[ref]), EXPIRES)
        figures[name] = {
            "capture_write": _cpu_ms_per_call(
                lambda i, b=backend, q=queue: b.add_captured(q, ItemRef(0, i), sets[i], EXPIRES), count
            ),
            "purge_read": _cpu_ms_per_call(lambda _i, b=backend, q=queue: b.captured_and_marks(q, READ_REFS), count),
        }
    return figures


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
    model = _backend(endpoint, one_pass=True).model
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
    calls = _ledger_calls(endpoint, elements, count, run)
    layers = _layers(endpoint, count * 3)
    ours, walk = calls["one_pass"], calls["botocore_walk"]
    return {
        "elements_per_item": elements,
        "requests_per_figure": count,
        "cpu_ms_per_request": calls,
        "one_pass_over_walk": {k: round(ours[k] / walk[k], 3) for k in ours},
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
    sys.exit(main())
