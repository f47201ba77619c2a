"""Every error the library raises on purpose, and whether retrying can help: one list.

A Lambda task's error reaches Step Functions as its class name, so a state machine's Retry
policy decides by name what the error's ``retryable`` flag already decides by type. This
catalog is the one place both meet: ``tests/unit/template/test_retry_policies.py`` checks
every task that invokes a BrokerSync function against it, so a state machine can never
retry an error the library says is never retried (the failback once retried
``PurgeInvariantError``), nor give up at once on one the library says will pass.
"""

from __future__ import annotations

from brokersync.capture.records import RejectedInputError
from brokersync.exceptions import (
    BrokerSyncError,
    BrokerUnavailableError,
    NotActingNowError,
    NotAllowedByAmazonMQError,
    RenderError,
    TopologyError,
)
from brokersync.failover.errors import (
    ConfigurationApplyError,
    FailoverRequestError,
    MoveNotReadyError,
    PromoteError,
    SwitchoverRefusedError,
    TransitionConflictError,
)
from brokersync.keys import InvalidKeyError
from brokersync.ledger.exceptions import LedgerError, LedgerRecordRefusedError, LedgerUnavailableError
from brokersync.purge.remover import PurgeInvariantError
from brokersync.roles import RoleAssignmentError

ERRORS: tuple[type[BrokerSyncError], ...] = (
    BrokerSyncError,
    BrokerUnavailableError,
    ConfigurationApplyError,
    FailoverRequestError,
    InvalidKeyError,
    LedgerError,
    LedgerRecordRefusedError,
    LedgerUnavailableError,
    MoveNotReadyError,
    NotActingNowError,
    NotAllowedByAmazonMQError,
    PromoteError,
    PurgeInvariantError,
    RejectedInputError,
    RenderError,
    RoleAssignmentError,
    SwitchoverRefusedError,
    TopologyError,
    TransitionConflictError,
)


def never_retried() -> list[str]:
    """Names of the errors a retry cannot fix, as a state machine's ``ErrorEquals`` lists them."""
    return sorted(e.__name__ for e in ERRORS if not e.retryable)


def retried() -> list[str]:
    """Names of the errors that pass (a broker rebooting, a throttled table)."""
    return sorted(e.__name__ for e in ERRORS if e.retryable)
