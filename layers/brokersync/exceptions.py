"""Errors the library raises; adapters translate client errors into these with ``raise ... from``.

Each error says whether retrying the same call can help, so that callers (a relay loop,
a Step Functions Retry policy at the edge) decide by type, never by message text.
"""

from __future__ import annotations


class BrokerSyncError(Exception):
    """Base of every error the library raises on purpose."""

    retryable: bool = False


class TopologyError(BrokerSyncError):
    """The topology file is invalid. ``field`` names the first offending field as a dotted path."""

    def __init__(self, field: str, reason: str) -> None:
        self.field = field
        self.reason = reason
        super().__init__(f"topology: {field}: {reason}")


class RenderError(BrokerSyncError):
    """A broker configuration cannot be rendered (bad base document, element Amazon MQ rejects)."""


class NotAllowedByAmazonMQError(RenderError):
    """The rendered or merged document holds an element or attribute Amazon MQ does not accept."""

    def __init__(self, path: str, name: str, kind: str = "attribute") -> None:
        self.path = path
        self.name = name
        self.kind = kind
        super().__init__(f"Amazon MQ does not allow {kind} {name!r} at {path}")


class BrokerUnavailableError(BrokerSyncError):
    """No endpoint of a broker accepted a STOMP connection, or the connection dropped mid-work.

    Retryable: brokers reboot (maintenance windows, failover drills) and come back.
    """

    retryable = True


class NotActingNowError(BrokerSyncError):
    """This region (or the broker an event came from) does not play the role the work needs now.

    Retryable: raised where work must wait rather than be dropped (receipts on a broker that
    is not primary, or while sync is stopped, stay on the broker and are retried until it is).
    """

    retryable = True
