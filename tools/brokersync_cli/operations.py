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
        env[ENV_LEDGER_TABLE] = f"brokersync-{pair}-ledger"
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


def add_parsers(sub: Any) -> None:
    apply = sub.add_parser(
        "apply-config",
        help="render a role's configuration for a deployed broker and make it its next revision (--reboot: run it)",
        description="Render ROLE's configuration over what the broker runs now (your own settings stay), create it "
        "as the broker's next revision, and with --reboot reboot the broker onto it and wait until it runs. "
        "Running it again creates no second revision and reboots nothing already on it.",
    )
    apply.add_argument("--role", choices=["primary", "dr"], required=True, help="the role whose configuration to apply")
    apply.add_argument("--broker", help="broker name in the topology (default: the broker playing ROLE now)")
    apply.add_argument("--pair", help="PairName of the stacks: read who plays ROLE from the role record")
    apply.add_argument("--reboot", action="store_true", help="reboot the broker onto the revision and wait for it")
    apply.add_argument(
        "--relay-wait",
        type=float,
        default=120.0,
        help="primary: seconds to wait for the relay to take every consumed advisory before the reboot (120);"
        " stop the consumers first and none is lost",
    )
    apply.add_argument("--no-relay-wait", action="store_true", help="reboot a primary without waiting for the relay")
    apply.add_argument("--timeout", type=float, default=1800.0, help="seconds to wait for RUNNING (default 1800)")
    apply.add_argument("--poll", type=float, default=10.0, help="seconds between state checks (default 10)")
    apply.add_argument(
        "--topology", default=default_topology(), help=f"topology file (default: ${ENV_TOPOLOGY}, else topology.yaml)"
    )
    apply.set_defaults(func=cmd_apply_config)
