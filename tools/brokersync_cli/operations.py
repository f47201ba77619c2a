"""Operator commands that act on a deployed pair (in AWS, or the local world through its endpoint).

They use the same library calls and the same environment variables as the functions
(``AWS_REGION``, ``BROKERSYNC_LEDGER_TABLE``, ``BROKERSYNC_PEER_REGION``, and locally
``AWS_ENDPOINT_URL`` and ``BROKERSYNC_BROKER_IDS``), so a command here does what a
transition's step would do, no more. Progress goes to stderr, the outcome as JSON to stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import asdict
from typing import Any

from brokersync.config import ENV_LEDGER_TABLE
from brokersync_cli.argtypes import pair_name, positive
from brokersync_cli.errors import UsageError
from brokersync_cli.names import ledger_table

#: The topology file, when --topology is not given (one way to name it, as a flag or in the environment).
ENV_TOPOLOGY = "BROKERSYNC_TOPOLOGY"


def default_topology() -> str:
    return os.environ.get(ENV_TOPOLOGY) or "topology.yaml"


def _progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _broker_playing(role: str, topology: Any, pair: str | None) -> str:
    """The broker playing ``role`` now: the role record when the ledger table is named, else the topology file."""
    from brokersync import runtime  # noqa: PLC0415 (builds AWS clients)
    from brokersync.roles import apply_roles  # noqa: PLC0415

    env = dict(os.environ)
    if pair:
        env[ENV_LEDGER_TABLE] = ledger_table(pair)
    if not env.get(ENV_LEDGER_TABLE):
        _progress(f"no --pair or {ENV_LEDGER_TABLE}: the roles are the topology file's, not the role record's")
        return str(topology.broker(role).name)
    store = runtime.role_store(env)
    return str(apply_roles(topology, store.assignment(topology)).broker(role).name)


def cmd_apply_config(args: argparse.Namespace) -> int:
    from brokersync import runtime  # noqa: PLC0415
    from brokersync.broker.statistics import StatisticsClient  # noqa: PLC0415
    from brokersync.failover.apply_config import apply_role_configuration, wait_for_relay  # noqa: PLC0415
    from brokersync.failover.errors import ConfigurationApplyError  # noqa: PLC0415
    from brokersync.topology import load_topology  # noqa: PLC0415

    topology = load_topology(args.topology)
    broker = args.broker or _broker_playing(args.role, topology, args.pair)
    entry = next(b for b in topology.brokers if b.name == broker) if args.role == "primary" else None

    def before_reboot() -> None:
        if entry is None or args.no_relay_wait:
            return
        try:
            connector = runtime.broker_connector(entry)
        except Exception as e:  # Secrets Manager's errors come wrapped by powertools
            raise ConfigurationApplyError(
                f"cannot read {entry.credentials_secret} to watch the relay before the reboot ({e}); "
                "--no-relay-wait reboots without watching"
            ) from e
        _progress(f"{broker}: waiting for the relay to take every consumed advisory before the reboot")
        wait_for_relay(StatisticsClient(connector), args.relay_wait, progress=_progress)

    applied = apply_role_configuration(
        runtime.broker_control(topology),
        topology,
        broker,
        args.role,
        reboot=args.reboot,
        timeout_s=args.timeout,
        poll_s=args.poll,
        progress=_progress,
        before_reboot=before_reboot,
    )
    print(json.dumps(asdict(applied)))
    return 0


def _topology_argument(parser: Any) -> None:
    parser.add_argument(
        "--topology", default=default_topology(), help=f"topology file (default: ${ENV_TOPOLOGY}, else topology.yaml)"
    )


def _table(pair: str | None) -> str:
    table = ledger_table(pair) if pair else os.environ.get(ENV_LEDGER_TABLE)
    if not table:
        raise UsageError(f"name the pair: --pair NAME (the stacks' PairName) or {ENV_LEDGER_TABLE}")
    return table


def cmd_status(args: argparse.Namespace) -> int:
    from brokersync.topology import load_topology  # noqa: PLC0415
    from brokersync_cli.status import StatusReader, format_status  # noqa: PLC0415

    status = StatusReader(load_topology(args.topology), _table(args.pair), rpo_s=args.rpo).read()
    if args.json:
        print(json.dumps(status.as_dict(), default=str))
    else:
        print(format_status(status))
    return status.code


def cmd_transition(args: argparse.Namespace) -> int:
    import boto3  # noqa: PLC0415

    from brokersync.topology import load_topology  # noqa: PLC0415
    from brokersync_cli.status import StatusReader  # noqa: PLC0415
    from brokersync_cli.transitions import TransitionRefused, run_transition  # noqa: PLC0415

    reader = StatusReader(load_topology(args.topology), _table(args.pair))
    region = boto3.session.Session().region_name or "us-east-1"
    try:
        return run_transition(args.command, reader, dry_run=args.plan, timeout_s=args.timeout, default_region=region)
    except TransitionRefused as e:
        from brokersync.failover.errors import FailoverRequestError  # noqa: PLC0415

        raise FailoverRequestError(str(e)) from e


def cmd_move_queue(args: argparse.Namespace) -> int:
    import boto3  # noqa: PLC0415

    from brokersync.failover.errors import FailoverRequestError  # noqa: PLC0415
    from brokersync.failover.move import MAX_TIMEOUT_S, MIN_TIMEOUT_S, check_move_request  # noqa: PLC0415
    from brokersync.topology import load_topology  # noqa: PLC0415
    from brokersync_cli.status import StatusReader  # noqa: PLC0415
    from brokersync_cli.transitions import TransitionRefused, run_move  # noqa: PLC0415

    if bool(args.queues) == bool(args.all_from):
        raise UsageError("move-queue: name the queues to move, or --all-from BROKER (one of the two)")
    if not MIN_TIMEOUT_S <= args.drain_timeout <= MAX_TIMEOUT_S:
        raise UsageError(f"--drain-timeout {args.drain_timeout}: seconds from {MIN_TIMEOUT_S} to {MAX_TIMEOUT_S}")
    named: dict[str, Any] = {"queues": args.queues} if args.queues else {"from": args.all_from}
    request = {**named, "to": args.to, "timeoutSeconds": args.drain_timeout}
    if args.old_side_lost:
        request["oldSideLost"] = True
    topology = load_topology(args.topology)
    if not args.plan:
        # A move the topology cannot hold is the user's to fix: refused before AWS is asked anything.
        # --plan reports it instead, as every refusal, in its JSON (exit 1).
        try:
            check_move_request(topology, request)
        except FailoverRequestError as e:
            raise UsageError(f"move-queue: {e}") from e
    reader = StatusReader(topology, _table(args.pair))
    region = boto3.session.Session().region_name or "us-east-1"
    try:
        return run_move(reader, request, dry_run=args.plan, timeout_s=args.timeout, default_region=region)
    except TransitionRefused as e:
        raise FailoverRequestError(str(e)) from e


def _execution_arguments(parser: Any, plan_help: str) -> None:
    """What every command that starts and follows a state machine takes."""
    parser.add_argument("--plan", action="store_true", help=plan_help)
    parser.add_argument("--pair", type=pair_name, help=f"PairName of the stacks (default: ${ENV_LEDGER_TABLE})")
    parser.add_argument("--timeout", type=positive("seconds"), default=1800.0, help="seconds to follow the execution")
    _topology_argument(parser)


def add_parsers(sub: Any) -> None:
    for command, what in (
        ("switchover", "planned: drain the copy backlog and the pending purge, then swap (0 lost, 0 duplicates)"),
        ("failover", "the primary is lost: promote the DR broker now (loses at most the copies in the bridge)"),
        ("failback", "the old primary is back: rejoin it as DR, remove what was consumed meanwhile, sync again"),
    ):
        transition = sub.add_parser(
            command,
            help=what,
            description=f"{command}: {what}. Starts the state machine in the region where it must run (the DR "
            "broker's for a switchover or failover, the primary's for a failback), prints each step as it is "
            "entered (stderr) and the outcome as JSON (stdout). --plan only prints what it would do and cost now.",
        )
        _execution_arguments(transition, "touch nothing: the steps and their cost now")
        transition.set_defaults(func=cmd_transition)

    move = sub.add_parser(
        "move-queue",
        help="move one active-active queue's consumption to the other broker; every other queue keeps running",
        description="Start the queue-move state machine in the region of the broker the queue moves to and follow "
        "it. It waits until the old side is drained (stop the queue's consumers there first), then flips the "
        "queue's active side in the role record: no reboot, no configuration change, 0 lost and 0 duplicates. "
        "Start the consumers on the new side once it succeeds. --plan only checks and prints what it would do.",
    )
    move.add_argument("queues", nargs="*", metavar="QUEUE", help="active-active queues of the topology, moved together")
    move.add_argument(
        "--all-from", metavar="BROKER", help="every active-active queue consumed on BROKER now (a lost region's)"
    )
    move.add_argument("--to", required=True, help="the broker (topology name) that consumes the queue afterwards")
    move.add_argument(
        "--drain-timeout",
        type=int,
        default=600,
        help="seconds the move waits for the old side to drain (600; 10-3600)",
    )
    move.add_argument(
        "--old-side-lost",
        action="store_true",
        help="the broker consuming the queue now is lost with its region: wait only for the new side's purge,"
        " and move anyway at --drain-timeout (what it consumed and had not relayed, and what the purge had not"
        " removed by then, may be delivered again; nothing is lost)",
    )
    _execution_arguments(move, "touch nothing: check the move and print its steps")
    move.set_defaults(func=cmd_move_queue)

    status = sub.add_parser(
        "status",
        help="both regions of a deployed pair: roles, a half-done transition, purge loops, both risk windows, alarms",
        description="Read both regions of a deployed pair (nothing is written): the roles and their epoch in each "
        "region's replica, a transition in progress, where purge loops run, per queue the copy backlog and the "
        "loss window, the pending purge and the duplicate window, the DR depth, and the alarms in ALARM. "
        "Exit code: 0 healthy, 1 broken, 3 degraded.",
    )
    status.add_argument(
        "--pair", type=pair_name, help=f"PairName of the stacks (default: ${ENV_LEDGER_TABLE} names the table)"
    )
    status.add_argument("--json", action="store_true", help="one JSON object on stdout instead of the table")
    status.add_argument(
        "--rpo", type=positive("seconds"), default=60.0, help="seconds a risk window may reach (default 60)"
    )
    _topology_argument(status)
    status.set_defaults(func=cmd_status)

    apply = sub.add_parser(
        "apply-config",
        help="render a role's configuration for a deployed broker and make it its next revision (--reboot: run it)",
        description="Render ROLE's configuration over what the broker runs now (your own settings stay), create it "
        "as the broker's next revision, and with --reboot reboot the broker onto it and wait until it runs. "
        "Running it again creates no second revision and reboots nothing already on it.",
    )
    apply.add_argument("--role", choices=["primary", "dr"], required=True, help="the role whose configuration to apply")
    apply.add_argument("--broker", help="broker name in the topology (default: the broker playing ROLE now)")
    apply.add_argument(
        "--pair", type=pair_name, help="PairName of the stacks: read who plays ROLE from the role record"
    )
    apply.add_argument("--reboot", action="store_true", help="reboot the broker onto the revision and wait for it")
    apply.add_argument(
        "--relay-wait",
        type=positive("seconds"),
        default=120.0,
        help="primary: seconds to wait for the relay to take every consumed advisory before the reboot (120);"
        " stop the consumers first and none is lost",
    )
    apply.add_argument("--no-relay-wait", action="store_true", help="reboot a primary without waiting for the relay")
    apply.add_argument(
        "--timeout", type=positive("seconds"), default=1800.0, help="seconds to wait for RUNNING (default 1800)"
    )
    apply.add_argument(
        "--poll", type=positive("seconds"), default=10.0, help="seconds between state checks (default 10)"
    )
    _topology_argument(apply)
    apply.set_defaults(func=cmd_apply_config)
