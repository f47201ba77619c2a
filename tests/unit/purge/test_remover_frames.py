"""What the remover does with each frame it is handed, over a scripted STOMP connection.

The broker races these cases (a frame dispatched just before its subscription closed, a
copy the bridge delivered twice), so they are scripted here to happen every time; the
real-broker tests cover the same code against ActiveMQ.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
import stomp

from brokersync.broker.inbox import DISCONNECTED, FrameInbox
from brokersync.exceptions import BrokerUnavailableError
from brokersync.keys import InvalidKeyError
from brokersync.purge import remover as remover_module
from brokersync.purge.remover import PurgeInvariantError, RemoverSettings, SelectorRemover

QUEUE = "ORDERS"


def mid(n: int) -> str:
    return f"ID:app-41000-1795340000000-1:1:-1:1:{n}"


@dataclass
class ScriptedTransport:
    """The bytes the remover writes, read back as the broker reads them: frame by frame, in order."""

    connection: ScriptedConnection
    blocking: bool = True
    listeners: dict[str, stomp.ConnectionListener] = field(default_factory=dict)
    #: The commands of each write, one list per write.
    writes: list[list[str]] = field(default_factory=list)

    def send(self, data: bytes) -> None:
        commands: list[str] = []
        for chunk in data.split(b"\x00"):
            if not (chunk := chunk.lstrip(b"\n")):
                continue
            frame = stomp.utils.parse_frame(chunk)
            commands.append(frame.cmd)
            if frame.cmd == "SUBSCRIBE":
                headers = dict(frame.headers)
                destination, sub_id, ack = headers.pop("destination"), headers.pop("id"), headers.pop("ack")
                self.connection.subscribe(destination, sub_id, ack, headers)
            elif frame.cmd == "ACK":
                self.connection.ack(frame.headers["id"])
            elif frame.cmd == "UNSUBSCRIBE":
                receipt = frame.headers.get("receipt")
                self.connection.unsubscribe(frame.headers["id"], {"receipt": receipt} if receipt else None)
        self.writes.append(commands)


@dataclass
class ScriptedConnection:
    """Delivers, on each SUBSCRIBE, the frames a script says the broker would dispatch.

    An ACK is cumulative, as ActiveMQ's ``ack: client``: it covers every frame dispatched on
    its subscription up to the one it names, in dispatch order, and nothing after it.
    """

    inbox: FrameInbox
    on_subscribe: Callable[[ScriptedConnection, str, list[str]], None]
    acked: list[str] = field(default_factory=list)
    ack_frames: int = 0
    unsubscribed: list[str] = field(default_factory=list)
    subscriptions: dict[str, list[str]] = field(default_factory=dict)
    subscribe_headers: dict[str, dict[str, str]] = field(default_factory=dict)
    dispatched: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    modes: set[str] = field(default_factory=set)
    connected: bool = True
    confirm: bool = True
    transport: ScriptedTransport = field(init=False)

    def __post_init__(self) -> None:
        self.transport = ScriptedTransport(self)

    def deliver(self, sub_id: str, message_id: str, body: str = "", **headers: str) -> None:
        """Dispatch one frame; ``body`` and ``headers`` are the message's (a twin differs in them)."""
        ack_id = f"ack-{len(self.dispatched.get(sub_id, []))}-{sub_id}"
        self.dispatched.setdefault(sub_id, []).append((ack_id, message_id))
        headers = {"subscription": sub_id, "message-id": message_id, "ack": ack_id, **headers}
        self.inbox.on_message(stomp.utils.Frame("MESSAGE", headers, body))

    def subscribe(self, destination: str, id: str, ack: str, headers: dict[str, str]) -> None:
        self.modes.add(ack)
        self.subscribe_headers[id] = {"destination": destination, **headers}
        selected = headers["selector"].removeprefix("JMSMessageID IN (").removesuffix(")")
        ids = [s.strip("'") for s in selected.split(",")]
        self.subscriptions[id] = ids
        self.on_subscribe(self, id, ids)

    def ack(self, ack_id: str) -> None:
        self.ack_frames += 1
        sub_id = ack_id.split("-", 2)[2]
        pending = self.dispatched[sub_id]
        upto = next(i for i, (a, _m) in enumerate(pending) if a == ack_id)
        self.acked += [m for _a, m in pending[: upto + 1]]
        self.dispatched[sub_id] = pending[upto + 1 :]

    def unsubscribe(self, sub_id: str, headers: dict[str, str] | None = None) -> None:
        self.unsubscribed.append(sub_id)
        if headers and "receipt" in headers and self.confirm:
            receipt = stomp.utils.Frame("RECEIPT", {"receipt-id": headers["receipt"]}, "")
            self.inbox.on_receipt(receipt)

    def is_connected(self) -> bool:
        return self.connected

    def disconnect(self) -> None:
        self.connected = False


class ScriptedConnector:
    def __init__(self, on_subscribe: Callable[[ScriptedConnection, str, list[str]], None]) -> None:
        self.on_subscribe = on_subscribe
        self.connections: list[ScriptedConnection] = []

    def connect(self, listener: FrameInbox, name: str = "") -> ScriptedConnection:
        connection = ScriptedConnection(listener, self.on_subscribe)
        self.connections.append(connection)
        return connection


def _remover(script: Callable[[ScriptedConnection, str, list[str]], None], **settings: float | bool) -> SelectorRemover:
    values = {"settle_s": 0.05, "timeout_s": 5.0, "min_group_s": 0.0, **settings}
    return SelectorRemover(ScriptedConnector(script), RemoverSettings(**values))  # type: ignore[arg-type]


def test_every_selected_message_present_is_acked_and_reported_removed() -> None:
    present = {mid(1), mid(3)}
    remover = _remover(lambda c, sub, ids: [c.deliver(sub, m) for m in ids if m in present])

    result = remover.remove(QUEUE, [mid(1), mid(2), mid(3)])

    assert sorted(result.removed) == [mid(1), mid(3)]
    assert result.not_found == [mid(2)]
    assert result.error is None


def test_a_message_the_bridge_delivered_twice_is_removed_in_both_copies() -> None:
    remover = _remover(lambda c, sub, ids: [c.deliver(sub, mid(1)), c.deliver(sub, mid(1))])

    result = remover.remove(QUEUE, [mid(1)])

    assert result.removed == [mid(1)]
    assert result.extra_copies == 1
    assert remover.connector.connections[0].acked == [mid(1), mid(1)]  # type: ignore[attr-defined]


def test_the_bridge_s_second_copy_marked_redelivered_is_still_one_message() -> None:
    """The primary raised its counter before resending: the delivery's headers differ, not the message's."""

    def script(c: ScriptedConnection, sub: str, ids: list[str]) -> None:
        c.deliver(sub, mid(1), "order 1", timestamp="1795340000000")
        c.deliver(sub, mid(1), "order 1", timestamp="1795340000000", redelivered="true")

    result = _remover(script).remove(QUEUE, [mid(1)])

    assert (result.removed, result.extra_copies, result.ambiguous) == ([mid(1)], 1, [])


@pytest.mark.parametrize("twin_first", [False, True], ids=["twin-after", "twin-first"])
def test_two_different_messages_under_one_id_are_neither_removed(twin_first: bool) -> None:
    """A client set its message's id to a consumed message's id: which copy was consumed cannot be
    told, so the cumulative ACK stops before the id's first copy, and the frames after it go back."""
    consumed = ("order 1", {"timestamp": "1795340000000", "correlation-id": "01HZX"})
    twin = ("not order 1", {"timestamp": "1795340000999"})
    first, second = (twin, consumed) if twin_first else (consumed, twin)

    def script(c: ScriptedConnection, sub: str, ids: list[str]) -> None:
        c.deliver(sub, mid(2))
        c.deliver(sub, mid(1), first[0], **first[1])
        c.deliver(sub, mid(3))
        c.deliver(sub, mid(1), second[0], **second[1])
        c.deliver(sub, mid(4))

    remover = _remover(script)
    result = remover.remove(QUEUE, [mid(n) for n in range(1, 5)])

    connection = remover.connector.connections[0]  # type: ignore[attr-defined]
    assert connection.acked == [mid(2)]
    assert result.removed == [mid(2)]
    assert result.ambiguous == [mid(1)]
    assert sorted(result.not_found) == [mid(1), mid(3), mid(4)]
    assert result.error is None


def test_an_id_met_twice_as_its_first_frame_covers_nothing_of_its_subscription() -> None:
    def script(c: ScriptedConnection, sub: str, ids: list[str]) -> None:
        c.deliver(sub, mid(1), "a")
        c.deliver(sub, mid(1), "b")

    remover = _remover(script)
    result = remover.remove(QUEUE, [mid(1), mid(2)])

    connection = remover.connector.connections[0]  # type: ignore[attr-defined]
    assert (connection.acked, connection.ack_frames) == ([], 0)
    assert len(connection.unsubscribed) == 1
    assert (result.removed, result.ambiguous) == ([], [mid(1)])


def test_a_subscription_is_acknowledged_with_one_cumulative_ack_whatever_it_removed() -> None:
    """Each ACK wakes a dispatch pass over the DR queue's whole backlog: one per batch, not per message."""
    remover = _remover(lambda c, sub, ids: [c.deliver(sub, m) for m in ids])

    result = remover.remove(QUEUE, [mid(n) for n in range(1, 101)])

    connection = remover.connector.connections[0]  # type: ignore[attr-defined]
    assert len(result.removed) == 100
    assert (connection.ack_frames, connection.modes) == (1, {"client"})


def test_the_ack_and_the_unsubscribe_leave_in_one_write_the_ack_first() -> None:
    """Sent apart, the passes the ACK wakes scan the DR backlog before the UNSUBSCRIBE is read."""
    remover = _remover(lambda c, sub, ids: [c.deliver(sub, m) for m in ids])

    remover.remove(QUEUE, [mid(1), mid(2)])

    connection = remover.connector.connections[0]  # type: ignore[attr-defined]
    assert connection.transport.writes == [["SUBSCRIBE"], ["ACK", "UNSUBSCRIBE"]]


def test_a_group_s_subscribes_leave_in_one_write() -> None:
    """Written apart, Nagle held each after the first until the broker acknowledged it: up to 40 ms (decision 0052)."""
    remover = _remover(lambda c, sub, ids: [c.deliver(sub, m) for m in ids], selector_bytes=200)

    result = remover.remove(QUEUE, [mid(n) for n in range(1, 13)])

    connection = remover.connector.connections[0]  # type: ignore[attr-defined]
    assert result.subscriptions > 1
    assert connection.transport.writes[0] == ["SUBSCRIBE"] * result.subscriptions
    assert sorted(result.removed) == sorted(mid(n) for n in range(1, 13))


def test_a_subscribe_carries_what_stomp_py_s_subscribe_would() -> None:
    remover = _remover(lambda c, sub, ids: [c.deliver(sub, m) for m in ids])

    remover.remove(QUEUE, [mid(1)])

    connection = remover.connector.connections[0]  # type: ignore[attr-defined]
    ((sub_id, ids),) = connection.subscriptions.items()
    assert ids == [mid(1)] and connection.modes == {"client"}
    assert connection.subscribe_headers[sub_id] == {
        "destination": f"/queue/{QUEUE}",
        "selector": f"JMSMessageID IN ('{mid(1)}')",
        "activemq.prefetchSize": "1",
    }


def test_a_subscription_that_found_nothing_is_closed_without_an_ack() -> None:
    remover = _remover(lambda c, sub, ids: None)

    result = remover.remove(QUEUE, [mid(1)])

    connection = remover.connector.connections[0]  # type: ignore[attr-defined]
    assert result.not_found == [mid(1)]
    assert connection.transport.writes == [["SUBSCRIBE"], ["UNSUBSCRIBE"]]


def test_a_subscription_that_found_all_its_ids_is_closed_without_waiting_for_the_others() -> None:
    """A finished subscription left open would be evaluated again by every dispatch pass."""
    closed_when: dict[str, int] = {}

    def script(c: ScriptedConnection, sub: str, ids: list[str]) -> None:
        if len(c.subscriptions) == 1:  # the first subscription finds everything at once
            for m in ids:
                c.deliver(sub, m)

    remover = _remover(script, selector_bytes=1000, settle_s=0.3)
    original = ScriptedConnection.unsubscribe

    def unsubscribe(self: ScriptedConnection, sub_id: str, headers: dict[str, str] | None = None) -> None:
        closed_when[sub_id] = len(self.unsubscribed)
        original(self, sub_id, headers)

    ScriptedConnection.unsubscribe = unsubscribe  # type: ignore[method-assign]
    try:
        started = time.monotonic()
        result = remover.remove(QUEUE, [mid(n) for n in range(1, 60)])
    finally:
        ScriptedConnection.unsubscribe = original  # type: ignore[method-assign]

    connection = remover.connector.connections[0]  # type: ignore[attr-defined]
    first = next(iter(connection.subscriptions))
    assert closed_when[first] == 0 and len(connection.subscriptions) > 1
    assert result.removed == connection.subscriptions[first]
    assert time.monotonic() - started >= 0.3  # the others waited for their settle


def test_a_frame_that_arrives_after_its_subscription_closed_is_late_not_a_violation() -> None:
    """Group 1's frame lands after group 1 unsubscribed; group 2 reads it and must not call it a violation."""
    subs: list[str] = []

    def script(c: ScriptedConnection, sub: str, ids: list[str]) -> None:
        subs.append(sub)
        if len(subs) == 2:  # group 2 starts: the broker had dispatched one more frame of group 1
            c.deliver(subs[0], c.subscriptions[subs[0]][0])
        for m in ids[1:]:
            c.deliver(sub, m)

    ids = [mid(n) for n in range(1, 600)]  # three selectors of message ids; one per group below
    remover = _remover(script, parallel_subscriptions=1)

    result = remover.remove(QUEUE, ids)

    assert result.error is None
    assert result.late == 1
    assert ids[0] not in result.removed  # never acked: the broker put it back for a later round


def test_a_frame_no_subscription_asked_for_is_not_acked_and_stops_the_call() -> None:
    remover = _remover(lambda c, sub, ids: [c.deliver(sub, mid(1)), c.deliver(sub, mid(99))])

    result = remover.remove(QUEUE, [mid(1), mid(2)])

    assert isinstance(result.error, PurgeInvariantError)
    assert mid(99) not in remover.connector.connections[0].acked  # type: ignore[attr-defined]
    assert result.removed == [mid(1)]  # acked before the stray, and confirmed


def test_a_frame_of_a_subscription_never_opened_is_a_violation() -> None:
    remover = _remover(lambda c, sub, ids: c.deliver("someone-else", ids[0]))

    result = remover.remove(QUEUE, [mid(1)])

    assert isinstance(result.error, PurgeInvariantError)
    assert result.removed == []


def test_a_failing_group_keeps_the_confirmed_removals_of_the_groups_before_it() -> None:
    subs: list[str] = []

    def script(c: ScriptedConnection, sub: str, ids: list[str]) -> None:
        subs.append(sub)
        if len(subs) == 2:
            c.inbox.on_disconnected()
            return
        for m in ids:
            c.deliver(sub, m)

    ids = [mid(n) for n in range(1, 400)]
    remover = _remover(script, parallel_subscriptions=1)

    result = remover.remove(QUEUE, ids)

    assert isinstance(result.error, BrokerUnavailableError)
    assert len(result.removed) == len(remover.connector.connections[0].subscriptions[subs[0]])  # type: ignore[attr-defined]


def test_acks_the_broker_never_confirms_are_not_reported_removed() -> None:
    def script(c: ScriptedConnection, sub: str, ids: list[str]) -> None:
        c.confirm = False
        for m in ids:
            c.deliver(sub, m)

    remover = _remover(script, timeout_s=0.3)

    result = remover.remove(QUEUE, [mid(1)])

    assert isinstance(result.error, BrokerUnavailableError)
    assert result.removed == []


def test_no_group_starts_too_close_to_the_deadline() -> None:
    remover = _remover(lambda c, sub, ids: None, min_group_s=1.0)

    result = remover.remove(QUEUE, [mid(1)], deadline=time.monotonic() + 0.5)

    assert result.deferred == 1
    assert result.subscriptions == 0
    assert remover.connector.connections[0].subscriptions == {}  # type: ignore[attr-defined]


def test_the_inbox_reports_a_dropped_connection_in_order() -> None:
    inbox = FrameInbox()
    inbox.on_disconnected()

    assert inbox.get(0) is DISCONNECTED


@pytest.mark.parametrize("bad", ["x') OR (1=1", "ID:app-1-1795340000000-1:1:-1:1:1\n"])
def test_a_malformed_id_refuses_the_whole_call_before_anything_is_sent(bad: str) -> None:
    remover = _remover(lambda c, sub, ids: None)

    with pytest.raises(InvalidKeyError):
        remover.remove(QUEUE, [mid(1), bad])


def test_a_socket_closed_under_a_send_ends_the_call_as_broker_unavailable_with_nothing_marked() -> None:
    """stomp.py raises the socket's own OSError (EBADF) when the connection closed between two sends."""
    subs: list[str] = []

    def script(c: ScriptedConnection, sub: str, ids: list[str]) -> None:
        subs.append(sub)
        if len(subs) == 2:
            raise OSError(9, "Bad file descriptor")
        for m in ids:
            c.deliver(sub, m)

    ids = [mid(n) for n in range(1, 600)]
    result = _remover(script, parallel_subscriptions=1).remove(QUEUE, ids)

    assert isinstance(result.error, BrokerUnavailableError)
    assert set(result.removed) == set(ids[: len(result.removed)])  # only the confirmed first group
    assert 0 < len(result.removed) < len(ids)


def test_every_connection_the_remover_opens_turns_tcp_s_delays_off(monkeypatch) -> None:
    """Else the broker holds all but a call's first MESSAGE for the kernel's 40 ms delayed ACK (decision 0052)."""
    hurried: list[object] = []
    monkeypatch.setattr(remover_module, "without_tcp_delays", hurried.append)
    remover = _remover(lambda c, sub, ids: [c.deliver(sub, m) for m in ids])

    remover.remove(QUEUE, [mid(1)])
    remover.remove(QUEUE, [mid(2)])

    assert hurried == remover.connector.connections  # type: ignore[attr-defined]
    assert len(hurried) == 2


def test_a_remover_told_not_to_leaves_tcp_s_delays_on(monkeypatch) -> None:
    hurried: list[object] = []
    monkeypatch.setattr(remover_module, "without_tcp_delays", hurried.append)
    remover = _remover(lambda c, sub, ids: [c.deliver(sub, m) for m in ids], no_tcp_delays=False)

    assert remover.remove(QUEUE, [mid(1)]).removed == [mid(1)]
    assert hurried == []
