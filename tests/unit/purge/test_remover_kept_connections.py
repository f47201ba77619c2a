"""Which STOMP connection each removal call uses: kept from call to call inside a purge run, never after a bad end.

Over the scripted connection of ``test_remover_frames``; the real-broker test of the same is
``tests/integration/test_exact_removal.py``.
"""

from __future__ import annotations

import threading

import pytest
import stomp

from brokersync.exceptions import BrokerUnavailableError
from brokersync.purge.remover import PurgeInvariantError, RemovalResult, RemoverSettings, SelectorRemover
from tests.unit.purge.test_remover_frames import QUEUE, ScriptedConnection, ScriptedConnector, _remover, mid


def _deliver_all(c: ScriptedConnection, sub: str, ids: list[str]) -> None:
    for m in ids:
        c.deliver(sub, m)


def _connections(remover: SelectorRemover) -> list[ScriptedConnection]:
    return remover.connector.connections  # type: ignore[attr-defined,no-any-return]


def test_calls_inside_a_run_share_one_connection() -> None:
    remover = _remover(_deliver_all)

    with remover.keeping_connections():
        first = remover.remove(QUEUE, [mid(1)])
        second = remover.remove(QUEUE, [mid(2)])

    assert (first.removed, second.removed) == ([mid(1)], [mid(2)])
    assert len(_connections(remover)) == 1
    assert _connections(remover)[0].acked == [mid(1), mid(2)]


def test_the_kept_connection_is_closed_when_the_run_ends() -> None:
    remover = _remover(_deliver_all)

    with remover.keeping_connections():
        remover.remove(QUEUE, [mid(1)])
        assert _connections(remover)[0].is_connected()

    assert not _connections(remover)[0].is_connected()


def test_outside_a_run_each_call_opens_and_closes_its_own_connection() -> None:
    remover = _remover(_deliver_all)

    remover.remove(QUEUE, [mid(1)])
    remover.remove(QUEUE, [mid(2)])

    assert [c.is_connected() for c in _connections(remover)] == [False, False]


def _second_call_after_a_frame_of_the_first_s_subscription(stray: str) -> tuple[RemovalResult, SelectorRemover]:
    """Two calls on a kept connection; as the second subscribes, the broker writes ``stray`` on the first's."""
    subs: list[str] = []

    def script(c: ScriptedConnection, sub: str, ids: list[str]) -> None:
        subs.append(sub)
        if len(subs) == 2:
            c.deliver(subs[0], stray)
        _deliver_all(c, sub, ids)

    remover = _remover(script)
    with remover.keeping_connections():
        remover.remove(QUEUE, [mid(1)])
        second = remover.remove(QUEUE, [mid(2)])
    return second, remover


def test_a_frame_of_an_earlier_call_s_subscription_is_late_in_the_next_call_and_never_acked() -> None:
    """The broker wrote one more frame of call 1's subscription after call 1 ended."""
    second, remover = _second_call_after_a_frame_of_the_first_s_subscription(mid(1))

    assert second.error is None
    assert (second.removed, second.late) == ([mid(2)], 1)
    assert _connections(remover)[0].acked == [mid(1), mid(2)]  # the late copy was not acked again


def test_a_frame_an_earlier_subscription_did_not_select_is_still_a_violation() -> None:
    second, remover = _second_call_after_a_frame_of_the_first_s_subscription(mid(99))

    assert isinstance(second.error, PurgeInvariantError)
    assert mid(99) not in _connections(remover)[0].acked


def test_subscription_ids_are_never_reused_on_a_kept_connection() -> None:
    remover = _remover(_deliver_all)

    with remover.keeping_connections():
        for n in range(1, 6):
            remover.remove(QUEUE, [mid(n)])

    assert len(_connections(remover)[0].subscriptions) == 5


@pytest.mark.parametrize("ending", ["unconfirmed", "dropped", "violation", "error-frame"])
def test_a_call_that_ended_badly_leaves_no_connection_for_the_next(ending: str) -> None:
    calls: list[str] = []

    def script(c: ScriptedConnection, sub: str, ids: list[str]) -> None:
        calls.append(sub)
        first = len(calls) == 1
        if first and ending == "unconfirmed":
            c.confirm = False
        elif first and ending == "dropped":
            c.inbox.on_disconnected()
            return
        elif first and ending == "violation":
            c.deliver(sub, mid(99))
        elif first and ending == "error-frame":
            c.inbox.on_error(stomp.utils.Frame("ERROR", {"message": "Unexpected ACK received for message-id [x]"}, ""))
        _deliver_all(c, sub, ids)

    remover = _remover(script, timeout_s=0.3)
    with remover.keeping_connections():
        remover.remove(QUEUE, [mid(1)])
        second = remover.remove(QUEUE, [mid(2)])

    first_connection, second_connection = _connections(remover)
    assert not first_connection.is_connected()
    assert second.removed == [mid(2)] and second.error is None
    assert second_connection.acked == [mid(2)]


def test_an_exception_nobody_expected_closes_the_connection() -> None:
    def script(c: ScriptedConnection, sub: str, ids: list[str]) -> None:
        raise RuntimeError("a bug")

    remover = _remover(script)
    with remover.keeping_connections():
        with pytest.raises(RuntimeError):
            remover.remove(QUEUE, [mid(1)])
        assert not _connections(remover)[0].is_connected()


def test_a_connection_that_dropped_between_calls_is_replaced() -> None:
    remover = _remover(_deliver_all)

    with remover.keeping_connections():
        remover.remove(QUEUE, [mid(1)])
        _connections(remover)[0].connected = False  # the broker closed it while the run paused
        second = remover.remove(QUEUE, [mid(2)])

    assert second.removed == [mid(2)]
    assert len(_connections(remover)) == 2


def test_a_connection_is_retired_after_its_subscriptions() -> None:
    connector = ScriptedConnector(_deliver_all)
    settings = RemoverSettings(settle_s=0.05, timeout_s=5.0, min_group_s=0.0, subscriptions_per_connection=2)
    remover = SelectorRemover(connector, settings)  # type: ignore[arg-type]

    with remover.keeping_connections():
        for n in range(1, 6):
            assert remover.remove(QUEUE, [mid(n)]).removed == [mid(n)]

    assert [len(c.subscriptions) for c in connector.connections] == [2, 2, 1]


def test_calls_on_two_threads_at_once_take_a_connection_each() -> None:
    both_subscribed = threading.Barrier(2, timeout=5)

    def script(c: ScriptedConnection, sub: str, ids: list[str]) -> None:
        both_subscribed.wait()
        _deliver_all(c, sub, ids)

    remover = _remover(script)
    results: dict[str, list[str]] = {}
    with remover.keeping_connections():
        threads = [
            threading.Thread(target=lambda q=q, n=n: results.update({q: remover.remove(q, [mid(n)]).removed}))
            for q, n in (("ORDERS", 1), ("PAYMENTS", 2))
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(10)

    assert results == {"ORDERS": [mid(1)], "PAYMENTS": [mid(2)]}
    assert len(_connections(remover)) == 2


def test_a_block_inside_another_keeps_the_connection_for_the_outer_one() -> None:
    remover = _remover(_deliver_all)

    with remover.keeping_connections():
        with remover.keeping_connections():
            remover.remove(QUEUE, [mid(1)])
        assert _connections(remover)[0].is_connected()
        remover.remove(QUEUE, [mid(2)])

    assert len(_connections(remover)) == 1


def test_a_removal_error_keeps_its_kind_with_kept_connections() -> None:
    """The connection failing to open is the same BrokerUnavailableError inside a run as outside."""

    class Unreachable:
        def connect(self, listener: object, name: str = "") -> ScriptedConnection:
            raise BrokerUnavailableError("DR broker unreachable")

    remover = SelectorRemover(Unreachable())  # type: ignore[arg-type]
    with remover.keeping_connections(), pytest.raises(BrokerUnavailableError):
        remover.remove(QUEUE, [mid(1)])


def test_with_keeping_turned_off_each_call_in_a_run_opens_its_own_connection() -> None:
    connector = ScriptedConnector(_deliver_all)
    remover = SelectorRemover(connector, RemoverSettings(settle_s=0.05, keep_connections=False))  # type: ignore[arg-type]

    with remover.keeping_connections():
        remover.remove(QUEUE, [mid(1)])
        remover.remove(QUEUE, [mid(2)])

    assert [c.is_connected() for c in connector.connections] == [False, False]


def test_a_connection_may_not_serve_fewer_than_one_subscription() -> None:
    with pytest.raises(ValueError, match="subscriptions_per_connection"):
        RemoverSettings(subscriptions_per_connection=0)
