"""What a deployed pair's resources are named, from its PairName: how the CLI finds them.

A second pair in the same account and region is ordinary (``samconfig.toml`` shows one), so
the CLI must tell the pair it was given from every other: by exact names, never by a prefix.
``brokersync-orders-`` is also the prefix of every name of a pair called ``orders-eu``. The
template builds each of these names from ``PairName``; ``tests/unit/template`` holds the two equal.
"""

from __future__ import annotations

import re

from brokersync_cli.argtypes import PAIR_NAME_PATTERN

#: The ledger's DynamoDB table.
LEDGER_TABLE = "brokersync-{pair}-ledger"
#: Each state machine the CLI starts or reads, by what it does.
STATE_MACHINES = {
    "failover": "brokersync-{pair}-failover",
    "failback": "brokersync-{pair}-failback",
    "move-queue": "brokersync-{pair}-move-queue",
    "purge-loop": "brokersync-{pair}-purge-loop",
    "reconcile": "brokersync-{pair}-reconcile",
}
#: What the local world names each of them (its deploy names them by logical id).
LOCAL_STATE_MACHINES = {
    "failover": "brokersync-FailoverStateMachine",
    "failback": "brokersync-FailbackStateMachine",
    "move-queue": "brokersync-MoveQueueStateMachine",
    "purge-loop": "brokersync-PurgeLoopStateMachine",
    "reconcile": "brokersync-ReconcileStateMachine",
}
#: Every alarm a stack creates is ``brokersync-<PairName>-<name>``, with these names.
ALARMS = (
    "loss-risk",
    "loss-window-above-rpo",
    "duplicate-risk",
    "oldest-pending-above-rpo",
    "dr-queue-memory-high",
    "dr-broker-memory-high",
    "return-backlog",
    "stale-primary",
    "forwarding-connector",
    "unsafe-broker-settings",
    "configuration-drift",
    "relay-stalled",
    "relay-errors",
    "purge-errors",
    "purge-invariant-violated",
    "ambiguous-message-ids",
    "purge-loop-stopped",
    "purge-loop-silent",
    "missing-on-dr",
    "advisories-parked",
    "advisories-lost",
    "network-bridge-down",
)
#: A table name, its pair by the template's PairName pattern (the one ``--pair`` takes).
_TABLE = re.compile(LEDGER_TABLE.format(pair=f"(?P<pair>{PAIR_NAME_PATTERN.strip('^$')})"), re.ASCII)


def ledger_table(pair: str) -> str:
    return LEDGER_TABLE.format(pair=pair)


def pair_of_table(table: str) -> str | None:
    """The PairName a ledger table was deployed for; None for a table the template would not name."""
    match = _TABLE.fullmatch(table)
    return match["pair"] if match else None


def state_machine_names(kind: str, pair: str | None) -> list[str]:
    """The names ``kind``'s state machine may have: the pair's (when known), then the local world's."""
    names = [STATE_MACHINES[kind].format(pair=pair)] if pair else []
    return [*names, LOCAL_STATE_MACHINES[kind]]


def alarm_names(pair: str) -> list[str]:
    return [f"brokersync-{pair}-{alarm}" for alarm in ALARMS]
