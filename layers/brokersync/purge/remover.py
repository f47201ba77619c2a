"""Removing messages from a DR queue by their JMS message id, touching nothing else.

The remover is given the message ids of messages consumed on the primary. Selecting on the
message id, not the correlation id, is what makes removal exact: two messages can share a
correlation id (a producer that retried a send after a lost receipt, an application that
reuses one), and only the copy of the message that was consumed may leave DR. The bridge
keeps a message's id, so a copy that the bridge delivered twice (a redelivery after a
reconnect) carries the same id as its original, and both copies go: they are one message.

Two *different* messages can also carry one id: a client may set its message's id to any
text (``MessageId.textView``; every AMQP message-id, decision 0027), another message's
included. Over STOMP the two look alike but for what they carry, so a second frame of an
id in one subscription is compared with the first (only then: first frames are kept, not
digested). The same body and the same headers (all but ``ack``, ``subscription`` and
``redelivered``, which are the delivery's) make it the bridge's second copy. Anything else
makes the id *ambiguous*: which of the two was consumed cannot be told, so neither may be
removed. The subscription's cumulative ACK then names the last frame before the id's first
copy, so that it covers neither; the subscription closes at once, and the id is returned in
``ambiguous``, never as removed. The two copies come back with a raised redelivery counter,
unavoidably: the broker dispatched them both to a selector that named their one id.

For each selector batch the remover opens a subscription whose selector is
``JMSMessageID IN (...)`` over exactly the batch, with a prefetch of exactly the batch's
size, checks every frame it receives (from its own thread, never stomp.py's listener
thread), and, once every id was found or no frame arrived for ``settle_s``, acknowledges
them all with **one cumulative ACK** (``ack: client``) and closes the subscription at once.
Ids not found stay pending: the copy may still be on the bridge, or deeper in the queue than
the broker pages into memory.

Why one ACK and a prefetch of the batch (measured: ``bench/sync.py``, decision 0008): on
every ACK ActiveMQ wakes the queue, and each wake-up is a dispatch pass that evaluates every
open, not-full subscription's selector against every paged-in message that is not yet
dispatched, that is, against the whole backlog of unconsumed messages on DR. Acking frame by
frame made that a pass per removed message, so the purge's broker cost grew with the DR
queue's depth. A subscription whose prefetch is the batch is *full* once its messages are
dispatched, and a pass skips a full subscription without evaluating anything; one cumulative
ACK followed at once by the UNSUBSCRIBE leaves the passes of one ACK per batch, not per
message. The ACK and the UNSUBSCRIBE leave in one write (decision 0015): an ACK wakes the
queue more than once, and each of those passes scanned the backlog again until the broker
had read the UNSUBSCRIBE.

Why the invariant holds ("a message not consumed on the primary is never received, acked,
nacked or redelivered by the purge"): ActiveMQ returns a subscription's delivered-but-unacked
frames with their redelivery counter raised (STOMP's UNSUBSCRIBE carries no
last-delivered sequence), so the purge must never be *delivered* a frame it may not
remove. The selector guarantees that: it names only consumed messages, built from validated,
quoted ids (:mod:`brokersync.purge.selectors`). Every frame is still checked before it is
acked:

* a frame of an open subscription whose id that subscription selected is taken, to be
  covered by the subscription's cumulative ACK (which covers, in ActiveMQ, exactly the
  frames dispatched on that subscription up to the one named, in dispatch order: the frames
  this remover received and checked);
* a frame of a subscription this call already closed (it raced the UNSUBSCRIBE) is *late*:
  it is a selected, consumed message, it cannot be acked any more, the broker puts it back
  and a later round removes it. Counted, never an error;
* anything else (an id no subscription asked for, a subscription id we never opened) is a
  violation: it is not acked (its subscription's ACK names the last good frame before it,
  so it is not covered), the call stops with :class:`PurgeInvariantError`, which the purge
  loop never retries and the edge turns into an alarm.

Within :meth:`SelectorRemover.keeping_connections` (a purge run), a call's connection is kept
for the next call instead of being closed, when the call ended cleanly: every subscription it
opened was closed, the receipt of its last UNSUBSCRIBE arrived, and no ERROR or failure came.
Opening a STOMP connection cost the purge about 1 ms of its CPU and the DR broker 2-3 ms of
its own, once per call, that is per queue with keys in every round (decision 0051). A kept
connection remembers every subscription opened on it, so a frame of an earlier call's
subscription is still *late*, not a violation; subscription ids are never reused. A
connection that ended a call any other way is closed, and the next call opens its own.

The last UNSUBSCRIBE of a group carries a receipt, and the broker processes a connection's
frames in order, so when the receipt arrives every ack before it has been handled. Handled is
not applied: ActiveMQ answers an ACK it cannot match with an ERROR frame and keeps the
connection (a message whose client set its id, ``MessageId.textView``, is looked up by the
parsed text and never matches). So a group's ids are returned as removed (and marked purged by
the caller) only when its receipt arrived and no ERROR arrived before it; the ids of a
subscription whose ACK was refused are returned as ``refused``, never as removed. A failure in a
later group keeps the confirmed removals of the groups before it: they are returned with the
error, not thrown away.
"""

from __future__ import annotations

import contextlib
import itertools
import re
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import stomp

from brokersync.broker.inbox import DISCONNECTED, FrameInbox
from brokersync.broker.stomp import CONNECTION_LOST, StompConnector, send_in_one_write, without_tcp_delays
from brokersync.exceptions import BrokerSyncError, BrokerUnavailableError
from brokersync.purge.selectors import MAX_HEADER_LINE_BYTES, selector_batches

#: ActiveMQ's answer to an ACK it cannot match (``ProtocolConverter.onStompAck``).
_REFUSED_ACK = re.compile(r"Unexpected ACK received for message-id \[(.*)\]")
#: MESSAGE headers that belong to one delivery, not to the message: two deliveries of one
#: message (the bridge's redelivery) differ in these and in nothing else.
_DELIVERY_HEADERS = frozenset({"ack", "subscription", "redelivered"})


def _one_message(first: stomp.utils.Frame, second: stomp.utils.Frame) -> bool:
    """Whether two frames of one id carry one message: the same body and the same headers but the delivery's."""

    def carried(frame: stomp.utils.Frame) -> dict[str, str]:
        return {name: value for name, value in frame.headers.items() if name not in _DELIVERY_HEADERS}

    return bool(first.body == second.body and carried(first) == carried(second))


class PurgeInvariantError(BrokerSyncError):
    """The broker delivered a message the purge did not ask for. Never retried."""

    retryable = False


@dataclass(frozen=True)
class RemoverSettings:
    #: Frames the broker may push per subscription before an ack: bounded (DESIGN.md, deadlock).
    prefetch: int = 500
    #: With no frame for this long, a subscription has found what the broker has paged in.
    settle_s: float = 0.4
    #: Upper bound for one ``remove`` call, whatever happens.
    timeout_s: float = 20.0
    #: Subscriptions open at once on the connection (one per selector batch).
    parallel_subscriptions: int = 16
    #: A group is not started with less time than this left before the deadline: it could not
    #: settle and confirm its acks in time.
    min_group_s: float = 1.0
    #: Longest selector header line; ActiveMQ refuses more than MAX_HEADER_LINE_BYTES. Smaller
    #: values only make more, shorter selectors (the property test uses that to reach many groups).
    selector_bytes: int = MAX_HEADER_LINE_BYTES
    #: Subscriptions a kept connection serves before it is closed: it remembers each one (its
    #: selected ids) to tell an earlier call's late frame from a violation, so this bounds that
    #: memory. At one subscription a round, about three rounds a second, some 80 s of rounds.
    subscriptions_per_connection: int = 256
    #: Whether :meth:`SelectorRemover.keeping_connections` keeps connections at all (False: a
    #: connection per call, as before decision 0051, which the sync bench measures beside it).
    keep_connections: bool = True
    #: Whether the remover's connections turn off Nagle's algorithm and TCP's delayed
    #: acknowledgement (:func:`~brokersync.broker.stomp.without_tcp_delays`): with them, the DR
    #: broker held all but the first MESSAGE of a call some 40 ms, every call, and a group's
    #: closes waited as long for the broker's acknowledgement (decision 0052). False only for
    #: the benches that measure it.
    no_tcp_delays: bool = True

    def __post_init__(self) -> None:
        if not 200 <= self.selector_bytes <= MAX_HEADER_LINE_BYTES:
            raise ValueError(f"selector_bytes must be between 200 and {MAX_HEADER_LINE_BYTES}")
        if self.subscriptions_per_connection < 1:
            raise ValueError("subscriptions_per_connection must be at least 1")


@dataclass
class RemovalResult:
    """What one ``remove`` call did. ``removed`` holds only ids whose acks the broker confirmed."""

    removed: list[str] = field(default_factory=list)
    not_found: list[str] = field(default_factory=list)
    #: Frames of already-closed subscriptions: consumed messages the broker put back.
    late: int = 0
    #: Copies acked beyond the first for one id (bridge redeliveries of one message).
    extra_copies: int = 0
    subscriptions: int = 0
    elapsed_s: float = 0.0
    #: Why the call stopped early, with ``removed`` still valid; ``None`` when it ran to the end.
    error: BrokerSyncError | None = None
    #: Groups skipped because the deadline was too close.
    deferred: int = 0
    #: Ids whose subscription's ACK the broker refused with an ERROR frame: not removed.
    refused: list[str] = field(default_factory=list)
    #: Ids that two different messages carry (a client set one of them): neither removed.
    ambiguous: list[str] = field(default_factory=list)


@dataclass
class _Subscription:
    selected: frozenset[str]
    outstanding: set[str]
    #: Message ids taken (checked, to be covered by the cumulative ACK), in dispatch order.
    taken: list[str] = field(default_factory=list)
    #: The ack id of each frame taken, in the same order: a cumulative ACK may name any of them.
    ack_ids: list[str] = field(default_factory=list)
    #: The first frame of each id taken, to tell a second copy of it from another message.
    firsts: dict[str, stomp.utils.Frame] = field(default_factory=dict)
    #: Ids the cumulative ACK covered (sent; confirmed by the group's receipt).
    acked: list[str] = field(default_factory=list)
    open: bool = True
    #: An ambiguous id was met: nothing after it in dispatch order may be covered any more.
    stopped: bool = False

    @property
    def last_ack(self) -> str | None:
        """The ack id the cumulative ACK names: the last frame taken."""
        return self.ack_ids[-1] if self.ack_ids else None

    def take(self, message_id: str, ack_id: str) -> None:
        self.outstanding.discard(message_id)
        self.taken.append(message_id)
        self.ack_ids.append(ack_id)

    def stop_before(self, message_id: str) -> None:
        """Cover nothing from ``message_id``'s first frame on: the ACK names the frame before it."""
        first = self.taken.index(message_id)
        del self.taken[first:], self.ack_ids[first:]
        self.outstanding.clear()
        self.stopped = True


@dataclass
class _Session:
    """One STOMP connection to the broker, and every subscription ever opened on it."""

    connection: stomp.Connection12
    inbox: FrameInbox
    subscriptions: dict[str, _Subscription] = field(default_factory=dict)

    def usable(self, settings: RemoverSettings) -> bool:
        return len(self.subscriptions) < settings.subscriptions_per_connection and self.connection.is_connected()

    def forget_what_was_taken(self) -> None:
        """Keep, of each closed subscription, only what classifies a late frame: its ids and that it is closed."""
        for sub_id, subscription in self.subscriptions.items():
            if subscription.outstanding or subscription.taken or subscription.firsts or subscription.acked:
                self.subscriptions[sub_id] = _Subscription(subscription.selected, set(), open=False)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.connection.disconnect()


class SelectorRemover:
    """Removes messages by message id from queues on one broker (the DR broker)."""

    _ids = itertools.count(1)

    def __init__(self, connector: StompConnector, settings: RemoverSettings | None = None) -> None:
        self.connector = connector
        self.settings = settings or RemoverSettings()
        #: Connections kept between calls; None outside :meth:`keeping_connections`.
        self._kept: list[_Session] | None = None
        self._kept_lock = threading.Lock()

    @contextlib.contextmanager
    def keeping_connections(self) -> Iterator[None]:
        """Within this block, a call that ended cleanly leaves its connection for the next call.

        Every kept connection is closed when the block ends, so none outlives the run that
        opened it (a Lambda invocation: a frozen container's connection would be dead when it
        thaws). Calls on several threads at once each take a connection of their own. A block
        inside another changes nothing.
        """
        with self._kept_lock:
            outermost = self._kept is None and self.settings.keep_connections
            if outermost:
                self._kept = []
        try:
            yield
        finally:
            if outermost:
                with self._kept_lock:
                    kept, self._kept = self._kept or [], None
                for session in kept:
                    session.close()

    def _session(self) -> _Session:
        """A kept connection still fit to use, or a new one."""
        with self._kept_lock:
            while self._kept:
                session = self._kept.pop()
                if session.usable(self.settings):
                    return session
                session.close()
        inbox = FrameInbox()
        connection = self.connector.connect(inbox, name="brokersync-purge")
        if self.settings.no_tcp_delays:
            without_tcp_delays(connection)
        return _Session(connection, inbox)

    def _release(self, session: _Session, *, clean: bool) -> None:
        """Keep ``session`` for the next call if the call ended cleanly and connections are kept; else close it."""
        if clean and session.usable(self.settings):
            session.forget_what_was_taken()
            with self._kept_lock:
                if self._kept is not None:
                    self._kept.append(session)
                    return
        session.close()

    def remove(self, queue: str, message_ids: list[str], *, deadline: float | None = None) -> RemovalResult:
        """Remove the messages of ``queue`` whose JMS message id is in ``message_ids``; report what was found.

        ``deadline`` (``time.monotonic()`` seconds) bounds the call beyond ``timeout_s``: a
        Lambda invocation passes its remaining time, so a round never outlives it.
        """
        started = time.monotonic()
        limit = started + self.settings.timeout_s
        if deadline is not None:
            limit = min(limit, deadline)
        result = RemovalResult()
        batches = selector_batches(message_ids, "message-id", max_line_bytes=self.settings.selector_bytes)
        if not batches:
            return result
        session = self._session()
        connection, inbox, subscriptions = session.connection, session.inbox, session.subscriptions
        errors_before = len(inbox.errors)
        finished = False
        try:
            step = self.settings.parallel_subscriptions
            for offset in range(0, len(batches), step):
                if limit - time.monotonic() < self.settings.min_group_s:
                    result.deferred = len(range(offset, len(batches), step))
                    break
                group = batches[offset : offset + step]
                try:
                    self._remove_group(connection, inbox, queue, group, subscriptions, result, limit)
                except BrokerSyncError as e:
                    result.error = e
                    break
                except CONNECTION_LOST as e:
                    # A send on a connection the broker (or the network) just closed raises stomp.py's
                    # own error or the socket's, depending on timing: either way this group's acks are
                    # unconfirmed, and nothing of it is marked.
                    result.error = BrokerUnavailableError(f"the DR broker connection failed mid-round: {e!r}")
                    break
                finally:
                    result.subscriptions += len(group)
            finished = True
        finally:
            # Anything but a call run to its end without error, ERROR frame or open subscription
            # (an exception nobody caught included) closes the connection.
            clean = finished and result.error is None and len(inbox.errors) == errors_before
            self._release(session, clean=clean and not any(s.open for s in subscriptions.values()))
        removed = set(result.removed)
        result.not_found = [k for k in dict.fromkeys(message_ids) if k not in removed]
        result.elapsed_s = time.monotonic() - started
        return result

    def _remove_group(
        self,
        connection: stomp.Connection12,
        inbox: FrameInbox,
        queue: str,
        group: list[tuple[list[str], str]],
        subscriptions: dict[str, _Subscription],
        result: RemovalResult,
        limit: float,
    ) -> None:
        opened: list[str] = []
        subscribes: list[tuple[str, dict[str, str]]] = []
        for batch, selector in group:
            sub_id = f"purge-{next(self._ids)}"
            subscriptions[sub_id] = _Subscription(frozenset(batch), set(batch))
            opened.append(sub_id)
            prefetch = str(min(self.settings.prefetch, len(batch)))
            subscribes.append(
                (
                    "SUBSCRIBE",
                    {
                        "destination": f"/queue/{queue}",
                        "id": sub_id,
                        "ack": "client",
                        "selector": selector,
                        "activemq.prefetchSize": prefetch,
                    },
                )
            )
        # The group's SUBSCRIBEs in one write, each built as stomp.py's subscribe builds it:
        # written apart, Nagle held the second until the broker acknowledged the first, which a
        # broker with nothing to dispatch for it delays by up to 40 ms (decision 0052).
        send_in_one_write(connection, subscribes)
        receipt = f"purge-confirm-{next(self._ids)}"
        errors_before = len(inbox.errors)
        confirmed = False
        try:
            violation = self._collect(connection, inbox, queue, opened, subscriptions, result, limit, receipt)
            for sub_id in opened:
                if subscriptions[sub_id].open:
                    self._close(connection, sub_id, subscriptions, opened, receipt)
            self._await_receipt(connection, inbox, receipt, limit)
            confirmed = True
            self._withdraw_refused(inbox.errors[errors_before:], opened, subscriptions, result)
        finally:
            if not confirmed:
                for sub_id in opened:
                    if subscriptions[sub_id].open:
                        subscriptions[sub_id].open = False
                        with contextlib.suppress(Exception):
                            connection.unsubscribe(sub_id)
        for sub_id in opened:
            result.removed.extend(dict.fromkeys(subscriptions[sub_id].acked))
        if violation is not None:
            raise violation

    def _collect(
        self,
        connection: stomp.Connection12,
        inbox: FrameInbox,
        queue: str,
        opened: list[str],
        subscriptions: dict[str, _Subscription],
        result: RemovalResult,
        limit: float,
        receipt: str,
    ) -> PurgeInvariantError | None:
        """Take frames until every subscription found its ids (each closed as it does) or none came for settle_s."""
        last_frame = time.monotonic()
        while any(subscriptions[s].open for s in opened):
            wait = min(last_frame + self.settings.settle_s, limit) - time.monotonic()
            frame = self._next(inbox, wait)
            if frame is None:
                break
            violation = self._take(frame, queue, subscriptions, result)
            if violation is not None:
                return violation
            subscription = subscriptions[frame.headers["subscription"]]
            if subscription.open and not subscription.outstanding:
                # Take what already arrived first (a second copy of an id, the bridge's redelivery,
                # is covered by the same ACK), then close every subscription that is done.
                while (more := self._next(inbox, 0)) is not None:
                    violation = self._take(more, queue, subscriptions, result)
                    if violation is not None:
                        return violation
                for sub_id in opened:
                    if subscriptions[sub_id].open and not subscriptions[sub_id].outstanding:
                        self._close(connection, sub_id, subscriptions, opened, receipt)
            last_frame = time.monotonic()
        # Frames that raced the settle timeout are selected ids too: take them rather than let
        # the unsubscribe hand them back with a raised redelivery counter.
        while (frame := self._next(inbox, 0)) is not None:
            violation = self._take(frame, queue, subscriptions, result)
            if violation is not None:
                return violation
        return None

    def _close(
        self,
        connection: stomp.Connection12,
        sub_id: str,
        subscriptions: dict[str, _Subscription],
        opened: list[str],
        receipt: str,
    ) -> None:
        """One cumulative ACK for what the subscription took, then UNSUBSCRIBE; the group's last carries the receipt.

        Both go in one write, the ACK first: the broker then reads the UNSUBSCRIBE before the
        dispatch passes the ACK's wake-ups run, and those find the subscription gone instead of
        scanning the backlog with its selector (``send_in_one_write``, decision 0015).
        """
        subscription = subscriptions[sub_id]
        subscription.open = False
        frames: list[tuple[str, dict[str, str]]] = []
        if subscription.last_ack is not None:
            frames.append(("ACK", {"id": subscription.last_ack}))
        last = not any(subscriptions[s].open for s in opened)
        frames.append(("UNSUBSCRIBE", {"id": sub_id, "receipt": receipt} if last else {"id": sub_id}))
        send_in_one_write(connection, frames)
        if subscription.last_ack is not None:
            subscription.acked = list(subscription.taken)

    def _take(
        self,
        frame: stomp.utils.Frame,
        queue: str,
        subscriptions: dict[str, _Subscription],
        result: RemovalResult,
    ) -> PurgeInvariantError | None:
        """Take ``frame`` if, and only if, an open subscription of ours selected its id; else say why not."""
        sub_id = frame.headers.get("subscription", "")
        message_id = frame.headers.get("message-id", "")
        subscription = subscriptions.get(sub_id)
        if subscription is None or message_id not in subscription.selected:
            return PurgeInvariantError(
                f"subscription {sub_id!r} on {queue} received {message_id!r}, which it did not select; not acked"
            )
        if not subscription.open or subscription.stopped:
            result.late += 1
            return None
        if message_id in subscription.outstanding:
            subscription.firsts[message_id] = frame
        elif _one_message(subscription.firsts[message_id], frame):
            result.extra_copies += 1
        else:
            subscription.stop_before(message_id)
            result.ambiguous.append(message_id)
            return None
        subscription.take(message_id, frame.headers["ack"])
        return None

    @staticmethod
    def _withdraw_refused(
        errors: list[stomp.utils.Frame],
        opened: list[str],
        subscriptions: dict[str, _Subscription],
        result: RemovalResult,
    ) -> None:
        """Take back the acks the broker refused: an ERROR before the receipt names the frame of a refused ACK.

        A cumulative ACK names a subscription's last frame, so the message id in ActiveMQ's
        "Unexpected ACK received for message-id [...]" says whose ACK it was. An ERROR that
        names no such frame withdraws every ack of the group: nothing unconfirmed is marked.
        """
        for error in errors:
            named = _REFUSED_ACK.search(error.headers.get("message", ""))
            owners = [
                s
                for s in opened
                if named is not None and subscriptions[s].taken and subscriptions[s].taken[-1] == named.group(1)
            ]
            for sub_id in owners or opened:
                subscription = subscriptions[sub_id]
                result.refused.extend(dict.fromkeys(subscription.acked))
                subscription.acked = []

    @staticmethod
    def _next(inbox: FrameInbox, wait: float) -> stomp.utils.Frame | None:
        item = inbox.get(wait)
        if item is None:
            return None
        if item is DISCONNECTED:
            raise BrokerUnavailableError("the DR broker dropped the purge connection")
        assert isinstance(item, stomp.utils.Frame)
        return item

    def _await_receipt(self, connection: stomp.Connection12, inbox: FrameInbox, receipt: str, limit: float) -> None:
        """The group's last UNSUBSCRIBE carries ``receipt``; the broker processes a connection's frames
        in order, so its arrival confirms every ACK before it."""
        # The receipt gets a few seconds even past the deadline: acks already sent are worth confirming.
        deadline = max(limit, time.monotonic() + min(5.0, self.settings.timeout_s))
        with inbox.receipt_arrived:
            while receipt not in inbox.receipts:
                if any(e.headers.get("receipt-id") == receipt for e in inbox.errors):
                    raise BrokerSyncError("the DR broker refused the purge's UNSUBSCRIBE: its acks are unconfirmed")
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not connection.is_connected():
                    raise BrokerUnavailableError("the DR broker did not confirm the purge acks")
                inbox.receipt_arrived.wait(remaining)
