"""``brokersync switchover|failover|failback [--plan]``: a transition started where it must run, and followed.

A switchover or failover runs in the DR broker's region (the region that survives when the
primary's is lost); a failback runs in the primary's region. The command finds that region's
state machine, starts it with the console's input, prints each step as the execution enters
it (stderr), and ends with the outcome as JSON (stdout): exit 0 when it succeeded.

``--plan`` touches nothing: it reads the pair as ``brokersync status`` does, runs the state
machine's own Plan checks (the same functions its Plan step calls, on the role and
transition records of the region it would run in, without claiming the transition) and, for
a switchover, its drain check against the old primary, and prints what the execution would
do (its steps, in order, and to which brokers) and what it would cost if started now: a
failover loses at most the copies waiting in the primary's outflow and duplicates at most
the pending purge; a switchover drains both first (0 and 0) and needs the primary readable;
a failback rejoins the DR broker and removes what was consumed meanwhile. Anything the state
machine would refuse (another transition half done, a switchover with the primary
unreachable) is refused here first, with the state machine's own reason.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError
from ulid import ULID

from brokersync.broker.statistics import StatisticsClient
from brokersync.exceptions import BrokerSyncError
from brokersync.failover.errors import FailoverRequestError
from brokersync.failover.move import plan_move
from brokersync.failover.steps import (
    TransitionStore,
    drain_queues,
    failback_to_run,
    new_primary_departures,
    read_drain,
    switchover_refusal,
    transition_to_run,
)
from brokersync.ledger import dynamodb_ledger, peer_replicas
from brokersync.roles import RoleStore
from brokersync_cli.names import pair_of_table, state_machine_names
from brokersync_cli.status import PairStatus, StatusReader, _endpoint, _regional_client, state_machines

#: Which state machine each command starts: what messages call it, the input it adds, and its kind
#: (how :mod:`brokersync_cli.names` names it, the template's way and the local world's).
COMMANDS: dict[str, tuple[str, dict[str, str], str]] = {
    "switchover": ("failover", {"mode": "SWITCHOVER"}, "failover"),
    "failover": ("failover", {"mode": "FAILOVER"}, "failover"),
    "failback": ("failback", {}, "failback"),
    "move-queue": ("queue move", {}, "move-queue"),
}


class TransitionRefused(Exception):  # noqa: N818 (a refusal, not a crash)
    """What the state machine would refuse, refused before anything starts."""


def run_region(command: str, status: PairStatus, topology: Any, default_region: str) -> str:
    """Where ``command`` runs: the DR broker's region for a switchover or failover, the primary's for a failback."""
    broker = status.dr if command in ("switchover", "failover") else status.primary
    region = next((b.region for b in topology.brokers if b.name == broker), None)
    return region or default_region


def find_machine(sfn: Any, command: str, table: str) -> dict[str, Any]:
    """The one state machine in this region that ``command`` starts for the pair whose ledger is ``table``.

    By its exact name (``brokersync-<PairName>-failover``): another pair in the same region has
    its own machines, and a name that merely begins the same may be another pair's
    (``orders-eu``'s begin with ``brokersync-orders-``). A table the template would not name
    leaves the pair unknown; then the region must hold exactly one machine of the kind.
    """
    kind = COMMANDS[command][2]
    pair = pair_of_table(table)
    names = state_machine_names(kind, pair)
    machines = [m for m in state_machines(sfn) if m["name"] in names or (pair is None and _of_kind(m["name"], kind))]
    if len(machines) != 1:
        found = sorted(m["name"] for m in machines)
        wanted = names[0] if pair else f"one brokersync-<PairName>-{kind}"
        raise TransitionRefused(
            f"expected {wanted} ({COMMANDS[command][0]} state machine) in {sfn.meta.region_name},"
            f" found {found or 'none'}"
        )
    return machines[0]


def _of_kind(name: str, kind: str) -> bool:
    return name.startswith("brokersync-") and name.endswith(f"-{kind}")


def step_names(definition: str) -> list[str]:
    """The execution's steps in the order the definition reaches them (Next and Choice defaults first)."""
    states: dict[str, Any] = json.loads(definition)["States"]
    order: list[str] = []
    pending = [json.loads(definition)["StartAt"]]
    while pending:
        name = pending.pop(0)
        if name in order or name not in states:
            continue
        order.append(name)
        state = states[name]
        following = [state.get("Next"), state.get("Default"), *(c.get("Next") for c in state.get("Choices", []))]
        pending.extend(n for n in following if n)
    return order


def state_machine_checks(command: str, reader: StatusReader, region: str) -> dict[str, Any]:
    """The Plan step's decision (and a switchover's drain check) for ``command`` in ``region``, writing nothing."""
    topology = reader.topology
    records = reader.records(region)
    try:
        current = TransitionStore(records).read()
        assignment = RoleStore(records).assignment(topology)
    except (BrokerSyncError, BotoCoreError, ClientError) as e:
        return {"refused": f"the role record cannot be read in {region}, where the {command} runs: {e}"}
    now_ms = int(time.time() * 1000)
    try:
        if command == "failback":
            transition, new = failback_to_run(current, assignment, topology, "plan", now_ms)
        else:
            mode = COMMANDS[command][1]["mode"]
            transition, new = transition_to_run(mode, None, current, assignment, topology, "plan", now_ms)  # type: ignore[arg-type]
    except FailoverRequestError as e:
        return {"refused": str(e)}
    checks: dict[str, Any] = {
        "refused": None,
        "nothing_to_do": transition is None,
        "resumes": None if new or transition is None else transition.execution,
    }
    if command == "switchover" and transition is not None:
        source = next(b for b in topology.brokers if b.name == transition.source)
        try:
            stats = StatisticsClient(reader.connector(source)).queue_stats(drain_queues(topology))
        except BrokerSyncError as e:
            return {**checks, "refused": switchover_refusal(source.name, e)}
        host = _endpoint("dynamodb")
        ledger = dynamodb_ledger(reader.table, region=region, host=host)
        replicas = peer_replicas(reader.table, region, host)
        target = next(b for b in topology.brokers if b.name == transition.target)
        at_target = new_primary_departures(
            topology, assignment, target.name, lambda: StatisticsClient(reader.connector(target)), ledger
        )
        drain = read_drain(topology, stats, ledger, replicas, source.region, read_only=True, at_target=at_target)
        checks["drain_now"] = drain
        checks["drain_waits_for"] = _waits_for(drain)
    return checks


def _waits_for(drain: dict[str, Any]) -> list[str]:
    """The drain's figures as the things a switchover started now would wait for."""
    waits = [f"the application's consumers on {q} to stop ({n})" for q, n in drain["consumers"].items() if n]
    waits += [f"{n:,} copies in {q} to reach DR" for q, n in drain["outflow"].items() if n]
    waits += [f"{n:,} consumed keys of {q} to be purged" for q, n in drain["pendingPurge"].items() if n]
    waits += [
        f"{n:,} consumed keys of {q} to reach this region's ledger replica and be purged"
        for q, n in (drain.get("pendingPurgeInSourceRegion") or {}).items()
        if n > drain["pendingPurge"].get(q, 0)
    ]
    if drain.get("sourceRegionLedgerUnreadable"):
        waits.append(f"the old primary's region's ledger replica to answer ({drain['sourceRegionLedgerUnreadable']})")
    if drain["advisoriesWaiting"]:
        waits.append(f"{drain['advisoriesWaiting']:,} advisories to be relayed")
    waits += [
        f"{n:,} departures of {q} from the new primary to be read by its relay"
        for q, n in (drain.get("departuresNotRelayedOnNewPrimary") or {}).items()
        if n
    ]
    if drain.get("newPrimaryUnreadable"):
        waits.append(f"the new primary's statistics to answer ({drain['newPrimaryUnreadable']})")
    return waits


def plan(
    command: str,
    status: PairStatus,
    machine: dict[str, Any],
    definition: str,
    region: str,
    checks: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """What ``command`` would do now and what it would cost; ``refused`` says why it would not start.

    ``checks`` (state_machine_checks) is the state machine's own verdict; without it (or when
    it passes) what ``status`` shows is checked too, so an unreadable primary refuses a
    switchover even when the Plan step would only find out at its probe.
    """
    checks = checks or {}
    source, target = (status.primary, status.dr) if command != "failback" else (status.dr, status.primary)
    queues = (status.health or {}).get("queues") or {}
    backlog = sum(q.get("copy_backlog") or 0 for q in queues.values())
    pending = sum(q.get("pending_purge") or 0 for q in queues.values())
    windows = {
        "loss_window_s": max((q.get("loss_window_s") or 0.0 for q in queues.values()), default=0.0),
        "duplicate_window_s": max((q.get("duplicate_window_s") or 0.0 for q in queues.values()), default=0.0),
    }
    if command == "failover":
        cost = {"lost_at_most": backlog, "duplicates_at_most": pending, **windows}
    else:  # a switchover drains both first; a failback moves no application
        cost = {"lost_at_most": 0, "duplicates_at_most": 0, **windows}
    refused = checks.get("refused") or _refusal_from_status(command, status, source)
    return {
        "command": command,
        "would_run_in": region,
        "state_machine": machine["stateMachineArn"],
        "input": COMMANDS[command][1],
        "from": source,
        "to": target,
        "brokers": {"primary": status.primary, "dr": status.dr},
        "steps": step_names(definition),
        "now": cost,
        "refused": refused,
        **{k: v for k, v in checks.items() if k != "refused"},
    }


def _refusal_from_status(command: str, status: PairStatus, source: str | None) -> str | None:
    half_done = [p for p in status.problems if "half done" in p]
    if half_done:
        return half_done[0]
    if command == "switchover" and any("primary cannot be read" in p for p in status.problems):
        return f"a switchover drains {source} first and it cannot be read: start a failover instead"
    if status.primary is None:
        return "the role record could not be read in any region"
    return None


#: Events one GetExecutionHistory call returns at most (AWS's limit; moto returns them all at once).
HISTORY_PAGE = 1000
#: Pages read for one poll at most: Step Functions ends an execution at 25,000 history events.
MAX_HISTORY_PAGES = 25


def new_events(sfn: Any, execution: str, seen: set[int]) -> Iterator[dict[str, Any]]:
    """The execution's events not in ``seen`` (added as they are yielded), oldest first, every page read.

    One call returns at most :data:`HISTORY_PAGE` events: a switchover whose drain waits long
    passes that (each check of the drain adds some nine), and reading only the first page left
    every later step unprinted while the execution went on.
    """
    request: dict[str, Any] = {"executionArn": execution, "maxResults": HISTORY_PAGE}
    for _page in range(MAX_HISTORY_PAGES):
        page = sfn.get_execution_history(**request)
        for event in page["events"]:
            if event["id"] not in seen:
                seen.add(event["id"])
                yield event
        if not page.get("nextToken"):
            return
        request["nextToken"] = page["nextToken"]


def follow(
    sfn: Any,
    execution: str,
    timeout_s: float,
    progress: Callable[[str], None],
    poll_s: float = 1.0,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, Any]:
    """Print each step the execution enters until it ends (or ``timeout_s``); its outcome.

    The status is read before the history, so that the history read after an execution ended
    holds its last steps too.
    """
    started = clock()
    seen: set[int] = set()
    while True:
        described = sfn.describe_execution(executionArn=execution)
        for event in new_events(sfn, execution, seen):
            entered = event.get("stateEnteredEventDetails")
            if entered:
                progress(f"{clock() - started:7.1f}s  {entered['name']}")
        if described["status"] != "RUNNING":
            output = json.loads(described.get("output") or "null")
            return {
                "execution": execution,
                "status": described["status"],
                "elapsed_s": round(clock() - started, 3),
                "output": output,
                "error": described.get("error"),
                "cause": described.get("cause"),
            }
        if clock() - started > timeout_s:
            elapsed = round(clock() - started, 3)
            return {"execution": execution, "status": "RUNNING", "elapsed_s": elapsed, "timedOut": True}
        sleep(poll_s)


def execution_name(command: str) -> str:
    """A name that says in the console's list who started the execution and what for, unique as names must be."""
    return f"cli-{command}-{ULID()}"


def run_transition(command: str, reader: StatusReader, *, dry_run: bool, timeout_s: float, default_region: str) -> int:
    status = reader.read()
    region = run_region(command, status, reader.topology, default_region)
    sfn = _regional_client("stepfunctions", region)
    machine = find_machine(sfn, command, reader.table)
    definition = sfn.describe_state_machine(stateMachineArn=machine["stateMachineArn"])["definition"]
    planned = plan(command, status, machine, definition, region, state_machine_checks(command, reader, region))
    if dry_run:
        print(json.dumps(planned))
        return 1 if planned["refused"] else 0
    if planned["refused"]:
        raise TransitionRefused(f"{command} refused: {planned['refused']}")
    progress = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
    progress(f"{command} {planned['from']} -> {planned['to']}: starting {machine['name']} in {region}")
    started = sfn.start_execution(
        stateMachineArn=machine["stateMachineArn"], name=execution_name(command), input=json.dumps(planned["input"])
    )
    outcome = follow(sfn, started["executionArn"], timeout_s, progress)
    print(json.dumps({"command": command, "region": region, **outcome}))
    return 0 if outcome["status"] == "SUCCEEDED" else 1


def run_move(
    reader: StatusReader,
    request: dict[str, Any],
    *,
    dry_run: bool,
    timeout_s: float,
    default_region: str,
) -> int:
    """``brokersync move-queue``: start the queue move in the region of the broker the queue moves to.

    The checks are the state machine's own Plan (``plan_move``) on that region's role record,
    so a request it would refuse is refused here before anything starts.
    """
    topology = reader.topology
    target = next((b for b in topology.brokers if b.name == request.get("to")), None)
    region = (target.region if target else None) or default_region
    sfn = _regional_client("stepfunctions", region)
    machine = find_machine(sfn, "move-queue", reader.table)
    definition = sfn.describe_state_machine(stateMachineArn=machine["stateMachineArn"])["definition"]
    try:
        assignment = RoleStore(reader.records(region)).assignment(topology)
        ctx = plan_move(topology, assignment, request, int(time.time() * 1000))
    except (BrokerSyncError, BotoCoreError, ClientError) as e:
        refused = str(e)
        ctx = None
    else:
        refused = None
    planned = {
        "command": "move-queue",
        "would_run_in": region,
        "state_machine": machine["stateMachineArn"],
        "input": request,
        "queues": ctx.queues if ctx else None,
        "from": ctx.source if ctx else None,
        "to": request.get("to"),
        "nothing_to_do": bool(ctx and ctx.done),
        "steps": step_names(definition),
        "refused": refused,
    }
    if dry_run:
        print(json.dumps(planned))
        return 1 if refused else 0
    if refused:
        raise TransitionRefused(f"move-queue refused: {refused}")
    progress = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
    queues = ", ".join(ctx.queues) if ctx else "?"
    progress(
        f"move {queues} {planned['from']} -> {planned['to']}: starting {machine['name']} in {region}"
        f" (stop their consumers on {planned['from']}; start them on {planned['to']} when it succeeds)"
    )
    started = sfn.start_execution(
        stateMachineArn=machine["stateMachineArn"], name=execution_name("move-queue"), input=json.dumps(request)
    )
    outcome = follow(sfn, started["executionArn"], timeout_s, progress)
    print(json.dumps({"command": "move-queue", "region": region, **outcome}))
    return 0 if outcome["status"] == "SUCCEEDED" else 1
