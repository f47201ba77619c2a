"""The one topology file: which two brokers are paired, which queues are synced, and how.

Every other artefact (both broker configurations, the SAM parameters, the local world) is
derived from this model, so it is strict: unknown fields are rejected rather than ignored,
because a misspelt tuning key that silently falls back to a default is how a DR setup
quietly stops protecting anything.
"""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Annotated, Literal

import yaml
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, field_validator, model_validator

from brokersync.exceptions import TopologyError
from brokersync.side_by_side import QUEUE_WORKERS
from brokersync.text_files import read_text_file
from brokersync.whole_numbers import WholeNumber, not_a_bool

#: The queue on the primary that buffers consumed advisories until the relay drains them.
CONSUMED_QUEUE = "BROKERSYNC.CONSUMED"
#: The queue applications publish JSON receipts to when they cannot rely on advisories.
RECEIPTS_QUEUE = "BROKERSYNC.RECEIPTS"
#: ActiveMQ publishes a consumed advisory for queue Q on this topic + Q.
CONSUMED_ADVISORY_PREFIX = "ActiveMQ.Advisory.MessageConsumed.Queue."
#: ... an expired-message advisory (always on, with ``orignalMessageId``) on this topic + Q ...
EXPIRED_ADVISORY_PREFIX = "ActiveMQ.Advisory.Expired.Queue."
#: ... and, when a message is moved to a dead-letter queue, an advisory on this topic + Q.
DLQ_ADVISORY_PREFIX = "ActiveMQ.Advisory.MessageDLQd.Queue."
#: Every way a message leaves a queue on the primary that the broker announces: each is
#: forwarded into CONSUMED_QUEUE, and each means the DR copy must go.
DEPARTURE_ADVISORY_PREFIXES = (CONSUMED_ADVISORY_PREFIX, EXPIRED_ADVISORY_PREFIX, DLQ_ADVISORY_PREFIX)
#: Where the relay parks advisories it cannot record (with the reason in a header).
PARKED_QUEUE = "BROKERSYNC.PARKED"
#: Where ActiveMQ dead-letters a message unless the broker's policy names another queue (its
#: shared dead-letter strategy). Operators send its messages again from it (the runbook).
DEAD_LETTER_QUEUE = "ActiveMQ.DLQ"
#: Prefix of every network connector we render, so a merge can tell ours from the customer's.
CONNECTOR_PREFIX = "brokersync-"

Role = Literal["primary", "dr"]
Mode = Literal["sync", "mirror", "active-active"]
SyncKey = Literal["correlation-id", "message-id"]

# Every pattern below is matched whole (``fullmatch``) over ASCII: Python's ``$`` also matches
# before a final newline, and ``\d`` takes any script's digits, so ``"ORDERS\n"`` or a port in
# Arabic-Indic digits would otherwise pass, to be rendered into the brokers' XML as another name.
# A plain physical queue name: no wildcards (`>` `*`), no composite separator (`,`), no blanks.
_QUEUE_NAME = re.compile(r"[A-Za-z0-9_$\-]+(\.[A-Za-z0-9_$\-]+)*", re.ASCII)
#: Longest synced queue name. ActiveMQ sets no limit, but BrokerSync puts the name into keys
#: AWS does limit: the ledger's partition keys (DynamoDB: 2,048 bytes) and the snapshot parts'
#: S3 keys (1,024 bytes, after a ``snapshots/<run>/<role>/`` prefix). A longer name would pass
#: the render and fail every ledger write of that queue, so it is refused here.
MAX_QUEUE_NAME_LENGTH = 255
#: Secrets Manager's own rule for a secret's name (the functions read the broker users' passwords there).
_SECRET_NAME_PATTERN = r"^[A-Za-z0-9/_+=.@-]{1,512}$"  # noqa: S105 (a name rule, not a password)
_BROKER_ID = re.compile(r"b-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.ASCII)
_BROKER_ARN = re.compile(
    r"arn:aws[a-z-]*:mq:[a-z0-9-]+:[0-9]{12}:broker:[A-Za-z0-9_-]{1,50}:"
    r"b-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
    re.ASCII,
)
_LOCAL_BROKER_ID = re.compile(r"local-[A-Za-z0-9_-]{1,50}", re.ASCII)
#: An endpoint's host: a DNS name or IPv4 address, or an IPv6 address in brackets. Nothing
#: else: the rendered connector URI puts endpoints in a composite whose own query follows
#: them, so a ``?`` or ``&`` inside one would set the bridge's options.
HOST_PATTERN = r"(?:[A-Za-z0-9_.-]+|\[[0-9A-Fa-f:.]+\])"
_PORT = r"(?P<port>[0-9]{1,5})"
_OPENWIRE = re.compile(rf"(?:ssl|tcp|nio|nio\+ssl)://{HOST_PATTERN}:{_PORT}", re.ASCII)
_STOMP = re.compile(rf"(?:stomp|stomp\+ssl|stomp\+nio|stomp\+nio\+ssl)://{HOST_PATTERN}:{_PORT}", re.ASCII)
#: ActiveMQ's own cap on a network connector's reconnect wait (SimpleDiscoveryAgent).
ACTIVEMQ_MAX_RECONNECT_DELAY_MS = 30_000
_RESERVED_PREFIXES = ("ActiveMQ.", "BROKERSYNC.")
#: Hosts whose plain-text endpoints are allowed: the local world's brokers on this machine.
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})
_ENDPOINT = re.compile(rf"(?P<scheme>[a-z+]+)://(?P<host>{HOST_PATTERN}):[0-9]{{1,5}}", re.ASCII)


def _is_endpoint(uri: str, pattern: re.Pattern[str]) -> bool:
    """Whether ``uri`` is wholly ``pattern``'s scheme, host and a port a socket can have (1-65535)."""
    match = pattern.fullmatch(uri)
    return match is not None and 1 <= int(match["port"]) <= 65_535


def is_plain_text_off_loopback(uri: str) -> bool:
    """True for an endpoint that would carry credentials in clear to another machine."""
    match = _ENDPOINT.fullmatch(uri)
    if not match:
        return False  # the URI validators reject it with their own message
    return "ssl" not in match["scheme"].split("+") and match["host"].lower() not in LOOPBACK_HOSTS


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Broker(_Strict):
    """One Amazon MQ broker of the pair, as the topology names it."""

    name: Annotated[str, Field(pattern=r"^[A-Za-z0-9_-]{1,50}$")]
    role: Role
    broker_id: str = Field(description="Amazon MQ broker id (b-...) or broker ARN")
    region: str | None = None
    openwire: Annotated[list[str], Field(min_length=1, max_length=2)]
    stomp: Annotated[list[str], Field(min_length=1, max_length=2)]
    credentials_secret: Annotated[str, Field(pattern=_SECRET_NAME_PATTERN)]
    crdr: bool = False

    @field_validator("broker_id")
    @classmethod
    def _broker_id_or_arn(cls, value: str) -> str:
        if any(pattern.fullmatch(value) for pattern in (_BROKER_ID, _BROKER_ARN, _LOCAL_BROKER_ID)):
            return value
        raise ValueError("must be an Amazon MQ broker id (b-<uuid>), a broker ARN, or local-<name>")

    @field_validator("openwire")
    @classmethod
    def _openwire_uris(cls, value: list[str]) -> list[str]:
        for uri in value:
            if not _is_endpoint(uri, _OPENWIRE):
                raise ValueError(f"{uri!r} is not an OpenWire endpoint like ssl://host:61617")
        return value

    @field_validator("stomp")
    @classmethod
    def _stomp_uris(cls, value: list[str]) -> list[str]:
        for uri in value:
            if not _is_endpoint(uri, _STOMP):
                raise ValueError(f"{uri!r} is not a STOMP endpoint like stomp+ssl://host:61614")
        return value

    @model_validator(mode="after")
    def _tls_off_loopback(self) -> Broker:
        """A real broker is reached over TLS only: its endpoints carry the broker users' passwords."""
        plain = [uri for uri in [*self.openwire, *self.stomp] if is_plain_text_off_loopback(uri)]
        if plain:
            raise ValueError(
                f"{', '.join(plain)}: plain-text endpoint of a broker off this machine; credentials would "
                "travel in clear. Use ssl:// (OpenWire) and stomp+ssl:// (STOMP), as Amazon MQ serves them; "
                "only loopback endpoints (the local world) may be plain"
            )
        return self

    @property
    def uses_tls(self) -> bool:
        """Amazon MQ endpoints are TLS; loopback brokers in the local world are not."""
        return all(uri.startswith(("ssl://", "nio+ssl://")) for uri in self.openwire)


def synced_queue_name(value: str) -> str:
    """``value`` if it can name a synced queue, else ValueError saying why: one plain physical
    queue (a comma would make it a composite destination, a wildcard many queues), within
    :data:`MAX_QUEUE_NAME_LENGTH`, outside BrokerSync's reserved prefixes."""
    if len(value) > MAX_QUEUE_NAME_LENGTH:
        raise ValueError(
            f"{value[:40]!r}... is {len(value)} characters long; "
            f"a synced queue's name has at most {MAX_QUEUE_NAME_LENGTH}"
        )
    if not _QUEUE_NAME.fullmatch(value):
        raise ValueError(f"{value!r} is not a plain queue name (no wildcards, commas or blanks)")
    if value.startswith(_RESERVED_PREFIXES):
        raise ValueError(f"{value!r} uses a reserved prefix ({', '.join(_RESERVED_PREFIXES)})")
    return value


class Queue(_Strict):
    """A queue kept in sync between the pair."""

    name: str
    mode: Mode = "sync"
    sync_key: SyncKey = "correlation-id"
    #: On a correlation-id queue, record a message that arrived without a correlation id by its
    #: message id instead of parking it. The purge then selects such keys on JMSMessageID.
    message_id_fallback: bool = False

    @field_validator("name")
    @classmethod
    def _physical_name(cls, value: str) -> str:
        return synced_queue_name(value)

    @property
    def captures_consumed(self) -> bool:
        """Sync and active-active queues raise consumed records: mirror queues have live DR consumers."""
        return self.mode != "mirror"

    @property
    def copies_both_ways(self) -> bool:
        """Produced to on either broker, so each broker copies its own producers' messages to the other."""
        return self.mode == "active-active"


class BridgeTuning(_Strict):
    """Network connector settings; only what Amazon MQ lets a configuration set (see docs/reference/topology.md)."""

    user: str | None = Field(
        default=None,
        description="Broker user the bridge authenticates as (Amazon MQ requires userName on TLS endpoints)",
    )
    #: Network connectors opened in parallel to the DR broker, each consuming every Q.DR.
    #: One bridge forwards persistent messages one synchronous store at a time; several
    #: share the load (order across bridges is not kept; see docs, "Copy throughput").
    parallel_bridges: Annotated[WholeNumber, Field(ge=1, le=16)] = 1
    #: Longest wait between the bridge's attempts to reach a DR broker that is down. ActiveMQ
    #: doubles the wait from 1 s after each failed attempt up to this cap; its own 30 s left
    #: copies waiting up to 30 s after every DR reboot, so the default is 5 s: one refused
    #: connect per 5 s of an outage for copies flowing within 5 s of the broker's return
    #: (decisions 0025 and 0053). 30000 renders the URI without the option.
    max_reconnect_delay_ms: Annotated[WholeNumber, Field(ge=1000, le=ACTIVEMQ_MAX_RECONNECT_DELAY_MS)] = 5_000


class DrTuning(_Strict):
    """DR queue policy: selector consumers only see what is paged into memory (see DESIGN.md)."""

    #: How the DR broker's journal reaches disk. One synchronous store per bridged message is
    #: the copy path's bottleneck (docs, "Copy throughput"): ``periodic`` syncs every
    #: ``journal_sync_interval_ms`` instead, which more than doubles the bridge's rate at the
    #: price of losing up to that interval of copies if the DR broker's host fails abruptly.
    journal_disk_sync: Literal["always", "periodic"] = "periodic"
    journal_sync_interval_ms: Annotated[WholeNumber, Field(ge=100, le=10_000)] = 1000
    max_page_size: Annotated[WholeNumber, Field(ge=200, le=1_000_000)] = 200_000
    max_browse_page_size: Annotated[WholeNumber, Field(ge=400, le=1_000_000)] = 200_000
    memory_limit_mb: Annotated[WholeNumber, Field(ge=1, le=65_536)] = 128


class Tuning(_Strict):
    bridge: BridgeTuning = BridgeTuning()
    dr: DrTuning = DrTuning()
    #: Synced queues the purge's round and the relay's ledger writes work on at once (decision
    #: 0049). Each queue the purge works on holds one STOMP connection to the broker it purges.
    queues_at_once: Annotated[WholeNumber, Field(ge=1, le=64)] = QUEUE_WORKERS


_GROUP = r"^[A-Za-z0-9_.@-]{1,100}$"
_PATTERN = re.compile(r"([A-Za-z0-9_$\-]+|\*|>)(\.([A-Za-z0-9_$\-]+|\*|>))*", re.ASCII)
Group = Annotated[str, Field(pattern=_GROUP)]


class Access(_Strict):
    """Who may touch what BrokerSync trusts, rendered as Amazon MQ's ``authorizationPlugin``.

    A forged consumed advisory or receipt would remove a real, unconsumed message from DR, so
    BrokerSync's own destinations (``BROKERSYNC.*``, every ``Q.DR``, the consumed-advisory
    topics it forwards) are writable only by BrokerSync's group and ``trusted_groups`` (and
    ``BROKERSYNC.RECEIPTS`` by ``receipt_groups``). Groups are Amazon MQ users' groups.

    ActiveMQ grants the *union* of every authorization entry whose pattern matches, so a
    broad grant such as ``queue=">"`` would reach BrokerSync's destinations too: application
    access is rendered per synced queue and for the patterns listed here, and rendering
    refuses any entry (yours or ours) that would let another group write them.
    """

    #: Render the authorization entries. ``false`` leaves authorization to you (unsafe: anyone
    #: who can write to the primary can then forge consumption, see the docs).
    enforce: bool = True
    #: The group of BrokerSync's own broker users: relay, purge, snapshot and the bridge.
    brokersync_group: Group = "brokersync"
    #: Operator groups that may also write BrokerSync's destinations (replaying parked advisories),
    #: and read ``ActiveMQ.DLQ`` (sending dead-lettered messages again as new ones).
    trusted_groups: list[Group] = Field(default_factory=lambda: ["admins"])
    #: Groups whose consumers publish JSON receipts to BROKERSYNC.RECEIPTS.
    receipt_groups: list[Group] = Field(default_factory=list)
    #: Groups of your applications: granted every synced queue and the patterns below.
    application_groups: list[Group] = Field(default_factory=lambda: ["users"])
    #: Further queue and topic patterns your applications use (ActiveMQ wildcards ``*`` and ``>``).
    application_queues: list[str] = Field(default_factory=list)
    application_topics: list[str] = Field(default_factory=list)

    @field_validator("application_queues", "application_topics")
    @classmethod
    def _patterns(cls, value: list[str]) -> list[str]:
        for pattern in value:
            if not _PATTERN.fullmatch(pattern):
                raise ValueError(f"{pattern!r} is not an ActiveMQ destination pattern like APP.> or orders.*")
        return value

    @property
    def brokersync_groups(self) -> list[str]:
        """Groups that may write BrokerSync's destinations: its own and the trusted operators'."""
        return list(dict.fromkeys([self.brokersync_group, *self.trusted_groups]))


class Topology(_Strict):
    """The pair, its synced queues and how they are copied."""

    version: Annotated[Literal[1], BeforeValidator(not_a_bool)] = 1
    dr_suffix: Annotated[str, Field(pattern=r"^\.[A-Za-z0-9_$\-]{1,32}$")] = ".DR"
    brokers: Annotated[list[Broker], Field(min_length=2, max_length=2)]
    queues: Annotated[list[Queue], Field(min_length=1)]
    tuning: Tuning = Tuning()
    access: Access = Access()

    @model_validator(mode="after")
    def _one_of_each_role(self) -> Topology:
        roles = sorted(b.role for b in self.brokers)
        if roles != ["dr", "primary"]:
            raise ValueError("brokers: need exactly one broker with role primary and one with role dr")
        if self.brokers[0].name == self.brokers[1].name:
            raise ValueError("brokers: the two brokers need different names")
        if self.brokers[0].crdr != self.brokers[1].crdr:
            raise ValueError("brokers: crdr must be set on both brokers of a CRDR pair or on neither")
        seen: set[str] = set()
        for queue in self.queues:
            if queue.name in seen:
                raise ValueError(f"queues: {queue.name!r} is listed twice")
            if queue.name.endswith(self.dr_suffix):
                raise ValueError(f"queues: {queue.name!r} ends with the DR suffix {self.dr_suffix!r}")
            seen.add(queue.name)
        copies = {name for q in self.queues for name in self.copy_names(q)}
        clash = sorted(seen & copies)
        if clash:
            raise ValueError(f"queues: {clash[0]!r} is the name of another queue's copy queue")
        if self.is_crdr and any(q.copies_both_ways for q in self.queues):
            raise ValueError(
                "queues: a CRDR pair replicates one way only; active-active needs BrokerSync's own copy path"
            )
        return self

    def broker(self, role: Role) -> Broker:
        """The broker currently playing ``role``."""
        return next(b for b in self.brokers if b.role == role)

    @property
    def primary(self) -> Broker:
        return self.broker("primary")

    @property
    def dr(self) -> Broker:
        return self.broker("dr")

    @property
    def is_crdr(self) -> bool:
        return self.brokers[0].crdr

    @property
    def captured_queues(self) -> list[Queue]:
        """The queues whose consumption is captured into the ledger and purged from the other broker.

        Sync and active-active queues; not mirror queues, whose DR consumers run live. Every
        part that captures, purges, audits or drains reads this one list.
        """
        return [q for q in self.queues if q.captures_consumed]

    def queue(self, name: str) -> Queue:
        """The synced queue named ``name``; ``KeyError`` for queues we do not sync."""
        for queue in self.queues:
            if queue.name == name:
                return queue
        raise KeyError(name)

    def dr_name(self, queue: Queue | str) -> str:
        """Name of the outbound copy queue on the primary (and the inbound alias on the DR broker)."""
        return self.copy_name(queue, self.dr)

    def copy_name(self, queue: Queue | str, to: Broker) -> str:
        """The queue that carries ``queue``'s copies to broker ``to``: the sender's outflow, the receiver's inflow.

        One-way queues (sync, mirror) have one such queue, ``Q<suffix>``, whichever broker is DR.
        An active-active queue is copied both ways, and each direction needs a name of its own,
        ``Q<suffix>.<receiving broker>``: one name would be the sender's outflow and its own
        inflow at once. The name is the same on both brokers, as a network bridge requires.
        """
        name = queue.name if isinstance(queue, Queue) else queue
        both_ways = any(q.name == name and q.copies_both_ways for q in self.queues)
        return f"{name}{self.dr_suffix}.{to.name}" if both_ways else f"{name}{self.dr_suffix}"

    def copy_names(self, queue: Queue | str) -> list[str]:
        """Every copy queue ``queue`` has, in the brokers' order (one for one-way queues)."""
        return list(dict.fromkeys(self.copy_name(queue, broker) for broker in self.brokers))

    def peer(self, broker: Broker) -> Broker:
        """The other broker of the pair."""
        return next(b for b in self.brokers if b.name != broker.name)

    def swapped(self) -> Topology:
        """The same pair after a failover or switchover: the DR broker plays primary and vice versa."""
        flipped = [b.model_copy(update={"role": "dr" if b.role == "primary" else "primary"}) for b in self.brokers]
        return self.model_copy(update={"brokers": flipped})

    def with_endpoints(self, endpoints: dict[str, tuple[list[str], list[str]]]) -> Topology:
        """The same topology with broker endpoints replaced by name (the local world points at loopback)."""
        brokers = [
            b.model_copy(update={"openwire": endpoints[b.name][0], "stomp": endpoints[b.name][1]})
            if b.name in endpoints
            else b
            for b in self.brokers
        ]
        return self.model_copy(update={"brokers": brokers})


def _field_path(loc: tuple[int | str, ...]) -> str:
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += f".{part}" if path else str(part)
    return path or "(top level)"


def parse_topology(data: object, *, source: str = "topology") -> Topology:
    """Validate already-loaded YAML/JSON data; raises :class:`TopologyError` naming the first bad field."""
    if not isinstance(data, dict):
        raise TopologyError("(top level)", f"{source} must be a mapping, got {type(data).__name__}")
    try:
        return Topology.model_validate(data)
    except ValidationError as e:
        first = e.errors()[0]
        message = first["msg"].removeprefix("Value error, ")
        loc = tuple(first["loc"])
        # Model-level checks report their own field as the message prefix ("queues: ...").
        if not loc and ": " in message:
            field, _, message = message.partition(": ")
            raise TopologyError(field, message) from e
        raise TopologyError(_field_path(loc), message) from e


#: Values a topology document may hold once its aliases are expanded. A real topology holds a
#: few hundred; the bound turns a recursive alias (``a: &a [*a]``) or a billion-laughs chain of
#: aliases into a clear error instead of a validation that never ends.
MAX_DOCUMENT_VALUES = 100_000


def _count_values(data: object, limit: int) -> int:
    """Values in ``data`` with every alias expanded, counting no further than ``limit + 1``."""
    seen, stack = 0, [data]
    while stack and seen <= limit:
        value = stack.pop()
        seen += 1
        if isinstance(value, dict):
            stack.extend(value.keys())
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
    return seen


class _UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing a key given twice in one mapping.

    PyYAML keeps the last of two equal keys and says nothing. In a topology that is lost
    configuration: a second ``queues:`` header appended below the first drops every queue listed
    under it, and a queue with ``mode:`` twice takes the one further down. Keys brought in by a
    merge (``<<: *defaults``) may be overridden, as YAML means them to be.
    """

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[object, object]:
        seen: set[object] = set()
        for key_node, _value in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            if isinstance(key, str | int | float | bool) and key in seen:
                raise yaml.constructor.ConstructorError(
                    "while reading a mapping", node.start_mark, f"found {key!r} a second time", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep)


def _named(text: str, source: str) -> io.StringIO:
    """``text`` as a stream called ``source``: PyYAML names it in its errors ("<unicode string>" otherwise)."""
    stream = io.StringIO(text)
    stream.name = source  # type: ignore[misc]
    return stream


def parse_topology_text(text: str, *, source: str) -> Topology:
    """Validate a topology document given as YAML text (a file's or a parameter's)."""
    try:
        data = yaml.load(_named(text, source), Loader=_UniqueKeyLoader)  # noqa: S506 (a safe loader's subclass)
    except yaml.YAMLError as e:
        raise TopologyError("(file)", f"{source} is not valid YAML: {e}") from e
    except RecursionError as e:  # nesting deeper than the parser's stack
        raise TopologyError("(file)", f"{source} nests too deeply to be a topology") from e
    if _count_values(data, MAX_DOCUMENT_VALUES) > MAX_DOCUMENT_VALUES:
        raise TopologyError(
            "(file)", f"{source} expands to more than {MAX_DOCUMENT_VALUES:,} values (a recursive or repeated alias?)"
        )
    return parse_topology(data, source=source)


#: Bytes a topology file may hold. SSM's advanced parameters, where the functions read it, hold
#: 8 KB; the bound is far above that, and keeps ``--topology /dev/zero`` from reading forever.
MAX_TOPOLOGY_BYTES = 1 << 20


def load_topology(path: str | Path) -> Topology:
    """Read and validate a topology file (YAML, UTF-8)."""
    path = Path(path)
    try:
        text = read_text_file(path, limit=MAX_TOPOLOGY_BYTES)
    except OSError as e:
        raise TopologyError("(file)", f"cannot read {path}: {e.strerror}") from e
    except ValueError as e:  # too large, or not UTF-8
        raise TopologyError("(file)", f"{path} is {e}: not a topology") from e
    return parse_topology_text(text, source=str(path))
