"""Errors a failover step raises; their class names are the ``Error`` the state machines match."""

from __future__ import annotations

from brokersync.exceptions import BrokerSyncError


class FailoverRequestError(BrokerSyncError):
    """The execution input is not a failover request (unknown mode, unknown broker name)."""


class SwitchoverRefusedError(BrokerSyncError):
    """A switchover needs the old primary (to drain it); it is unreachable, so FAILOVER is the choice."""


class PromoteError(BrokerSyncError):
    """Amazon MQ refused to promote the CRDR replica broker."""


class ConfigurationApplyError(BrokerSyncError):
    """Amazon MQ refused the rendered configuration or the broker update."""


class TransitionConflictError(BrokerSyncError):
    """Another transition changed the roles first (the role record's epoch moved under this one).

    Never retried: the roles are no longer what this transition planned from. Read them again
    (``brokersync status``) and start a new transition if one is still wanted.
    """


class MoveNotReadyError(BrokerSyncError):
    """A queue move waited its whole timeout and the old side was still not drained: nothing was changed."""
