"""``brokersync`` command line.

The CLI is an operator and developer tool, not Lambda runtime code, so it is the one place
allowed to reach both the library (``brokersync``) and the local harness (``brokersync_local``).
The harness is imported lazily so that ``brokersync render`` works without the dev extras.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import sys
import traceback
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

from brokersync.exceptions import BrokerSyncError
from brokersync.text_files import read_text_file
from brokersync_cli import operations, reconcile
from brokersync_cli.argtypes import MAX_COST_RATE, count, non_negative, port, positive
from brokersync_cli.errors import UsageError


def _cmd_render(args: argparse.Namespace) -> int:
    from brokersync.render import render_configuration  # noqa: PLC0415 (keeps --help fast)
    from brokersync.topology import load_topology  # noqa: PLC0415

    topology = load_topology(args.topology)
    if args.base is None:
        document = render_configuration(topology, args.role)
    else:
        # A base that cannot be merged (not XML, not a <broker>, a grant that would open
        # BrokerSync's queues to others) is the user's file to fix: exit 2, as for a missing one.
        with user_input(f"--base {args.base}"):
            base = read_text_file(args.base)
            document = render_configuration(topology, args.role, base=base)
    if args.out:
        out_dir = Path(args.out)
        out_dir.mkdir(parents=True, exist_ok=True)
        target = out_dir / f"{topology.broker(args.role).name}-{args.role}.xml"
        target.write_text(document, encoding="utf-8")
        print(target)
    else:
        sys.stdout.write(document)
    return 0


def _cmd_local(args: argparse.Namespace) -> int:
    from brokersync_local import commands  # noqa: PLC0415 (dev-only harness)

    return commands.run(args)


def _cmd_sync(args: argparse.Namespace) -> int:
    from brokersync_local import commands  # noqa: PLC0415 (dev-only harness)

    return commands.run_sync(args)


def _cmd_cost(args: argparse.Namespace) -> int:
    from brokersync_cli.cost import load_prices, report  # noqa: PLC0415

    with user_input(f"--prices {args.prices}"):
        prices = load_prices(args.prices)
    queues, source = args.queues, "--queues"
    if queues is None:
        queues, source = _captured_queue_count(args.topology or operations.default_topology())
    with user_input("brokersync cost"):
        estimates = report(args.rate or [100.0, 1000.0], prices, queues=queues)
    print(json.dumps({"captured_queues_from": source, **estimates}, indent=2))
    return 0


def _captured_queue_count(path: str) -> tuple[int, str]:
    """How many queues the topology file captures, and where that came from: 1 without the file."""
    from brokersync.topology import load_topology  # noqa: PLC0415

    if not Path(path).exists():
        return 1, f"no --queues and no {path}: 1"
    with user_input(f"--topology {path}"):
        return len(load_topology(path).captured_queues), path


def _cmd_copy_burst(args: argparse.Namespace) -> int:
    from brokersync_local.copy_burst import main_copy_burst  # noqa: PLC0415 (dev-only harness)

    return main_copy_burst(args)


def _check_drill_queue(topology: str, queue: str | None, mode: str) -> None:
    """A queue the drill cannot count on (or a topology without one) is refused before a broker starts."""
    from brokersync.topology import load_topology  # noqa: PLC0415
    from brokersync_local.drill import drill_queue  # noqa: PLC0415 (dev-only harness)
    from brokersync_local.errors import LocalWorldError  # noqa: PLC0415 (dev-only harness)

    try:
        drill_queue(load_topology(topology), queue, mode)
    except LocalWorldError as e:
        raise UsageError(str(e)) from e


def _cmd_demo(args: argparse.Namespace) -> int:
    from brokersync_local.demo import DEMO_PORTS, main_demo  # noqa: PLC0415 (dev-only harness)

    shifted = DEMO_PORTS.shifted(args.port_offset)
    if not all(1 <= number <= 65535 for number, _ in shifted.labelled()):
        ports = ", ".join(str(number) for number, _ in DEMO_PORTS.labelled())
        raise UsageError(f"--port-offset {args.port_offset}: moves the demo's ports ({ports}) outside 1-65535")
    _check_drill_queue(args.topology, None, args.mode)
    return main_demo(args)


def _cmd_drill(args: argparse.Namespace) -> int:
    from brokersync_local.drill import DrillSettings, run_drill  # noqa: PLC0415 (dev-only harness)
    from brokersync_local.interrupts import stop_on_interrupt  # noqa: PLC0415

    _check_drill_queue(args.topology, args.queue, args.mode)
    settings = DrillSettings(
        mode=args.mode,
        topology=Path(args.topology),
        state_dir=Path(args.state_dir),
        rate=args.rate,
        duration=args.duration,
        kill_at=args.kill_at,
        report=Path(args.report) if args.report else None,
        seed=args.seed,
        keep=args.keep,
        queue=args.queue,
        warm_up_s=args.warm_up,
    )
    stop_on_interrupt()
    # stomp.py logs every refused connect to a broker a drill killed or partitioned; the JSON says what happened.
    logging.getLogger("stomp.py").setLevel(logging.CRITICAL)
    outcome = run_drill(settings, out=lambda line: print(line, file=sys.stderr))
    print(json.dumps(outcome))
    return 0


#: brokersync_local.drill.DrillMode, spelled out so that --help needs no harness import (tested equal).
DRILL_MODES = [
    "switchover",
    "failover",
    "failback",
    "region-loss",
    "dr-region-loss",
    "round-trips",
    "new-dr-region",
    "move-queue",
    "move-then-region-loss",
    "move-then-switchover",
]


def _add_demo_and_drill(sub: Any) -> None:
    """The two commands that run a fresh pair of their own: the demo and the drill."""
    demo = sub.add_parser(
        "demo", help="the whole system on a fresh local pair: steady load shown live, then a drill and its summary"
    )
    demo.add_argument("--mode", default="switchover", choices=["switchover", "failover"])
    demo.add_argument(
        "--rate", type=positive("msg/s"), default=200.0, help="messages per second produced (default 200)"
    )
    demo.add_argument(
        "--duration", type=positive("seconds"), default=60.0, help="seconds of steady load before the drill (60)"
    )
    demo.add_argument(
        "--after", type=non_negative("seconds"), default=None, help="seconds of load after the switch (default: 15)"
    )
    demo.add_argument("--report", default="reports/demo", help="directory for the drill's HTML report")
    demo.add_argument("--headless", action="store_true", help="plain periodic lines, even on a terminal")
    demo.add_argument("--json", dest="json_out", default=None, help="also write the summary as JSON to this file")
    demo.add_argument("--topology", default="topology.yaml")
    demo.add_argument("--state-dir", default=".brokersync/demo")
    demo.add_argument("--port-offset", type=int, default=0, help="move the demo's five ports by this much")
    demo.set_defaults(func=_cmd_demo)

    drill = sub.add_parser(
        "drill", help="a switchover, failover or failback on a fresh local pair; prints loss, duplicates and RTO"
    )
    drill.add_argument(
        "--mode",
        required=True,
        choices=DRILL_MODES,
        help="region-loss: the primary's whole region partitioned, failover in the other, the region back and fenced,"
        " then the failback; dr-region-loss: the DR region partitioned for longer than the purge's missing cutoff,"
        " then back; round-trips: switchover and back, twice; new-dr-region: the primary's region lost for good and"
        " the survivor re-paired with a broker in a third region. These four run on regions of their own;"
        " move-queue: an active-active queue's consumers moved to the DR broker under load from producers on"
        " both (--topology examples/active-active.yaml); move-then-region-loss: that move on two regions, then the"
        " DR region lost with the queue consumed there and the queue moved back with --old-side-lost;"
        " move-then-switchover: that move, then a switchover of the pair to the broker consuming the queue",
    )
    drill.add_argument(
        "--rate", type=positive("msg/s"), default=500.0, help="messages per second produced (default 500)"
    )
    drill.add_argument(
        "--duration",
        type=positive("seconds"),
        default=30.0,
        help="seconds of traffic (default 30); at least 5 s follow the switch",
    )
    drill.add_argument(
        "--kill-at", type=non_negative("seconds"), default=None, help="seconds into the traffic (default: random)"
    )
    drill.add_argument(
        "--warm-up",
        type=non_negative("seconds"),
        default=0.0,
        help="seconds of traffic at --rate carried end to end before the clock starts, so the brokers'"
        " JVMs have compiled their hot paths as a long-running pair's have (default 0: a few messages)",
    )
    drill.add_argument("--report", default=None, help="directory for the HTML report with a timeline plot")
    drill.add_argument("--seed", type=int, default=None, help="seed for the random kill moment")
    drill.add_argument("--topology", default="topology.yaml")
    drill.add_argument(
        "--queue",
        default=None,
        help="the queue the applications use (default: the first sync queue); an active-active queue "
        "also gets a producer on the DR broker, at the same rate",
    )
    drill.add_argument("--state-dir", default=".brokersync/drill")
    drill.add_argument("--keep", action="store_true", help="leave the drill's pair running afterwards")
    drill.set_defaults(func=_cmd_drill)


DESCRIPTION = """\
BrokerSync keeps an Amazon MQ for ActiveMQ DR broker in sync with its primary:
every message copied, every message consumed on the primary removed from DR.
This command renders broker configurations, estimates cost, reconciles, and runs
the local world (a real ActiveMQ pair with moto as AWS) with its demo and drills.
"""

EPILOG = """\
examples:
  brokersync render --role primary --out build/     the primary's configuration
  brokersync cost --rate 500                        monthly AWS cost at 500 msg/s
  brokersync drill --mode failover --report out/    a measured failover, locally
  brokersync apply-config --role primary --reboot   the primary's configuration, applied
  brokersync local up && brokersync local status    the local pair

exit codes:
  0  done, or healthy
  1  failed, or not healthy (the message on stderr says why)
  2  usage: a bad option, or an input file or value that cannot be used
  130  interrupted

Set BROKERSYNC_DEBUG=1 to see the traceback behind an error message.
"""


#: Commands that run the local world or the Spark job: they need the repository's template,
#: functions and jobs, so an installed wheel refuses them with a sentence instead of failing deep.
CHECKOUT_COMMANDS = frozenset({"local", "sync", "copy-burst", "demo", "drill", "reconcile"})
CHECKOUT = Path(__file__).resolve().parents[2]


def _in_checkout() -> bool:
    root = CHECKOUT
    return (root / "template.yaml").is_file() and (root / "functions").is_dir() and (root / "jobs").is_dir()


def _version() -> str:
    try:
        return metadata.version("brokersync")
    except metadata.PackageNotFoundError:
        return "unknown (not installed)"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="brokersync",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"brokersync {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    render = sub.add_parser("render", help="render an Amazon MQ broker configuration from the topology")
    render.add_argument("--topology", default="topology.yaml", help="topology file (default: topology.yaml)")
    render.add_argument("--role", choices=["primary", "dr"], required=True)
    render.add_argument("--base", help="the broker's existing configuration to merge into")
    render.add_argument("--out", help="directory to write <broker>-<role>.xml into (default: stdout)")
    render.set_defaults(func=_cmd_render)

    local = sub.add_parser("local", help="the local world: a real ActiveMQ pair on loopback and moto as AWS")
    local.add_argument("--topology", default="topology.yaml")
    local.add_argument("--state-dir", default=".brokersync/local", help="where pids, data and env.json live")
    local_sub = local.add_subparsers(dest="local_command", required=True)
    up = local_sub.add_parser("up", help="start both brokers, their bridges and the moto server")
    up.add_argument("--primary-openwire", type=port, default=61616)
    up.add_argument("--primary-stomp", type=port, default=61613)
    up.add_argument("--dr-openwire", type=port, default=62616)
    up.add_argument("--dr-stomp", type=port, default=62613)
    up.add_argument("--aws-port", type=port, default=5005)
    up.add_argument("--timeout", type=positive("seconds"), default=60.0, help="seconds to wait for brokers and bridges")
    local_sub.add_parser(
        "deploy",
        help="create in the running world's moto what sam deploy creates (table, secrets, buckets, state machines) "
        "and write <state-dir>/sam-env-vars.json for sam local invoke",
    )
    invoke = local_sub.add_parser(
        "invoke",
        help="run one function from sam build's output under python3.13 against the local world (sam local invoke "
        "without Docker)",
    )
    invoke.add_argument("function", help="logical id in template.yaml, e.g. PurgeDrFunction")
    invoke.add_argument("--event", help="event file (default: the function's sample in events/)")
    invoke.add_argument("--build-dir", default=".brokersync/sam-build-host", help="a sam build output for this machine")
    local_sub.add_parser("down", help="stop what `up` started, by pid")
    local_sub.add_parser("status", help="print the state of each local process")
    local.set_defaults(func=_cmd_local)

    sync = sub.add_parser("sync", help="run the relay and purge loops against the local pair")
    sync.add_argument("--topology", default="topology.yaml")
    sync.add_argument("--state-dir", default=".brokersync/local")
    sync.add_argument("sync_command", choices=["start", "stop", "status"])
    sync.set_defaults(func=_cmd_sync)

    burst = sub.add_parser("copy-burst", help="the local pair copying a burst of messages to DR, verified")
    burst.add_argument("--topology", default="topology.yaml")
    burst.add_argument("--state-dir", default=".brokersync/local")
    burst.add_argument("--messages", type=count, default=300, help="messages in the burst (default 300)")
    burst.add_argument("--keep", action="store_true", help="leave the local world running afterwards")
    burst.set_defaults(func=_cmd_copy_burst)

    _add_demo_and_drill(sub)
    operations.add_parsers(sub)
    reconcile.add_parser(sub)

    cost = sub.add_parser("cost", help="estimated monthly AWS cost of both stacks at a message rate")
    cost.add_argument(
        "--rate",
        type=positive("msg/s", most=MAX_COST_RATE),
        action="append",
        help=f"msg/s, at most {MAX_COST_RATE:,.0f} (repeatable; default 100 and 1000)",
    )
    cost.add_argument("--prices", type=Path, default=None, help="JSON file overriding prices by name")
    cost.add_argument(
        "--queues",
        type=count,
        default=None,
        help="synced queues sharing the rate evenly (default: those --topology captures; 1 without the file):"
        " each has its own relay batches and purge rounds, whose writes cost the same however few messages they"
        " carry, and the purge loop reads each one's work pointers five times a second, busy or not",
    )
    cost.add_argument(
        "--topology",
        help=f"topology file to count the synced queues in (default: ${operations.ENV_TOPOLOGY}, else topology.yaml"
        " when there is one)",
    )
    cost.set_defaults(func=_cmd_cost)
    return parser


def _harness_errors() -> tuple[type[Exception], ...]:
    """The local harness's own error, when the harness is there (``render`` works without it)."""
    try:
        from brokersync_local.errors import LocalWorldError  # noqa: PLC0415
    except ImportError:
        return ()
    return (LocalWorldError,)


def _aws_errors() -> tuple[type[Exception], ...]:
    """What botocore raises when AWS cannot be asked (no credentials, no region, no route) or
    says no (access denied, a missing state machine). Imported only when an error is being
    matched, so ``--help`` does not pay for botocore."""
    from botocore.exceptions import BotoCoreError, ClientError  # noqa: PLC0415

    return (BotoCoreError, ClientError)


def _fail(error: Exception, code: int, *, source: str = "") -> int:
    """One line on stderr, no traceback (unless BROKERSYNC_DEBUG is set), and the exit code."""
    if os.environ.get("BROKERSYNC_DEBUG"):
        traceback.print_exception(error)
    print(f"brokersync: {source}{error}", file=sys.stderr)
    return code


@contextlib.contextmanager
def user_input(what: str) -> Iterator[None]:
    """Reading what the user named (a file, a name in it): any failure is theirs to fix (exit 2)."""
    try:
        yield
    except (OSError, ValueError, BrokerSyncError) as e:  # pydantic's ValidationError is a ValueError
        raise UsageError(f"{what}: {e}") from e


def _check_checkout(command: str) -> None:
    """An installed package refuses the commands that need the repository, in one sentence."""
    if command in CHECKOUT_COMMANDS and not _in_checkout():
        raise UsageError(
            f"brokersync {command} runs from a source checkout of BrokerSync (its template, functions and jobs), "
            "not from an installed package: clone the repository and run it there (make demo, make test)"
        )


def _check_topology(args: argparse.Namespace) -> None:
    """Every command that takes --topology refuses a missing or invalid one before starting anything."""
    path = getattr(args, "topology", None)
    if path is None:
        return
    from brokersync.topology import load_topology  # noqa: PLC0415

    with user_input(f"--topology {path}"):
        load_topology(path)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        _check_checkout(args.command)
        _check_topology(args)
        return int(args.func(args))
    except UsageError as e:
        return _fail(e, 2)
    except (BrokerSyncError, *_harness_errors()) as e:
        return _fail(e, 1)
    except _aws_errors() as e:
        return _fail(e, 1, source="AWS: ")
    except KeyboardInterrupt:
        # Commands that start processes stop them in their own handlers; one reaching here was
        # interrupted before it started anything (while importing, say): say so, not a traceback.
        print("brokersync: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
