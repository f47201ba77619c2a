"""Building a backlog on a real broker for a benchmark: fill a queue, read its depth, wait for it.

Benchmarks that measure the purge against a deep DR queue need the same three steps: put
many persistent messages on a queue quickly (several connections, no receipt per send: the
depth, read afterwards, is the proof), read a queue's depth from the broker's own
statistics, and wait, with a bound, until a depth is reached.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from brokersync.broker.statistics import StatisticsClient
from brokersync.broker.stomp import StompConnector


def fill_queue(
    connector: StompConnector,
    queue: str,
    count: int,
    body: str,
    *,
    connections: int = 4,
    headers: Callable[[], dict[str, str]] | None = None,
) -> None:
    """``count`` persistent messages onto ``queue`` over ``connections`` connections in parallel.

    ``headers`` is called once per message (a fresh correlation id each, say).
    """

    def worker(n: int) -> None:
        connection = connector.connect(name="brokersync-bench-backlog")
        try:
            for _ in range(n):
                extra = headers() if headers is not None else {}
                connection.send(f"/queue/{queue}", body, headers={"persistent": "true", **extra})
        finally:
            connection.disconnect()

    shares = [count // connections + (i < count % connections) for i in range(connections)]
    threads = [threading.Thread(target=worker, args=(n,)) for n in shares if n]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def queue_depth(connector: StompConnector, queue: str) -> int:
    """Messages on ``queue`` now, from the broker's statistics plugin (0 for a queue not created yet)."""
    found = StatisticsClient(connector).queue_stats([queue]).get(queue)
    return found.size if found else 0


def wait_until(condition: Callable[[], bool], timeout_s: float, what: str, *, poll_s: float = 0.1) -> None:
    """Return once ``condition()`` holds; ``TimeoutError`` naming ``what`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} within {timeout_s:.0f}s")
        time.sleep(poll_s)
