"""Calls into another region, which may be the one lost, give up after the attempts they say."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ReadTimeoutError

from brokersync.runtime import PEER_REGION_CLIENT
from brokersync_cli.status import REGION_CLIENT


@pytest.fixture
def frozen_region() -> Iterator[tuple[str, list[socket.socket]]]:
    """An endpoint that accepts connections and never answers (a region paused mid-failure)."""
    server = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.1)
        while not stop.is_set():
            try:
                accepted.append(server.accept()[0])
            except TimeoutError:
                continue

    worker = threading.Thread(target=accept, daemon=True)
    worker.start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}", accepted
    stop.set()
    worker.join(2)
    for connection in accepted:
        connection.close()
    server.close()


@pytest.mark.parametrize("config", [PEER_REGION_CLIENT, REGION_CLIENT], ids=["peer-region", "status"])
def test_a_region_that_does_not_answer_is_asked_twice_then_given_up_on(
    frozen_region: tuple[str, list[socket.socket]], config: Config
) -> None:
    url, accepted = frozen_region
    fast = config.merge(Config(connect_timeout=0.2, read_timeout=0.2))  # the attempts as configured, shorter
    client = boto3.client(
        "stepfunctions", region_name="us-west-2", endpoint_url=url,
        aws_access_key_id="x", aws_secret_access_key="x", config=fast,
    )  # fmt: skip

    with pytest.raises(ReadTimeoutError):
        client.list_state_machines()

    assert len(accepted) == 2
