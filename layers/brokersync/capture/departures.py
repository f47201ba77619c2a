"""What a broker counted leaving its queues that its relay has not read yet.

Every dequeue from a captured queue raises one consumed advisory: an application's
consumption, which the broker's relay records, or the purge's removal, which a relay whose
broker does not consume that queue drains without recording (:mod:`brokersync.sides`).
Both add to the audit's captured count for the broker's incarnation
(:mod:`brokersync.capture.audit`). So the broker's dequeue counter less that count is what its
relay still has to read.

A transition that changes who consumes a queue waits for that figure to reach zero on each
broker whose relay reads under the roles it changes: a queue move on both sides (decision
0055), and a switchover on the new primary, whose ``BROKERSYNC.CONSUMED`` its reboot empties.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from brokersync.broker.statistics import StatisticsClient
from brokersync.exceptions import BrokerUnavailableError
from brokersync.ledger.backend import AuditBackend
from brokersync.topology import CONSUMED_QUEUE


@dataclass(frozen=True)
class Departures:
    """One broker's figures per queue: its consumers, and the dequeues its relay has not read."""

    consumers: dict[str, int]
    unrelayed: dict[str, int]
    #: Advisories waiting in the broker's ``BROKERSYNC.CONSUMED``.
    advisories: int
    #: Why the broker could not be read ("" when it was).
    unreadable: str

    @classmethod
    def none(cls, queues: Sequence[str], unreadable: str = "") -> Departures:
        """The figures of a side that was not read (a lost one) or could not be: no count to wait for."""
        return cls(dict.fromkeys(queues, 0), dict.fromkeys(queues, 0), 0, unreadable)

    @property
    def all_relayed(self) -> bool:
        """Read, and every departure counted is in the audit: nothing is left for the relay."""
        return not self.unreadable and not any(self.unrelayed.values())


def read_departures(statistics: StatisticsClient, audits: AuditBackend, queues: Sequence[str]) -> Departures:
    """``queues``' departures on the broker ``statistics`` reads, against the audit in ``audits``.

    An unreachable broker is returned as :meth:`Departures.none` with the reason, for the
    caller to wait on: nothing can be said about what its relay has read.
    """
    try:
        stats = statistics.queue_stats([*queues, CONSUMED_QUEUE])
    except BrokerUnavailableError as e:
        return Departures.none(queues, unreadable=str(e))
    consumers = dict.fromkeys(queues, 0)
    unrelayed = dict.fromkeys(queues, 0)
    for name in queues:
        queue = stats.get(name)
        if queue is None:
            continue
        consumers[name] = queue.consumer_count
        counted = audits.audits(name)
        captured = counted[queue.broker_id].captured if queue.broker_id in counted else 0
        unrelayed[name] = max(0, queue.dequeue_count - captured)
    advisories = stats[CONSUMED_QUEUE].size if CONSUMED_QUEUE in stats else 0
    return Departures(consumers, unrelayed, advisories, "")
