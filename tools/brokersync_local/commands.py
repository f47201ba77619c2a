"""``brokersync local up|down|status``: the CLI's adapter over :class:`LocalWorld`."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from brokersync.text_files import read_text_file
from brokersync.topology import load_topology
from brokersync_local.errors import LocalWorldError
from brokersync_local.world import LocalWorld, WorldPorts, ports_from_env

#: The largest event a synchronous Lambda invocation takes (6 MB).
LAMBDA_PAYLOAD_BYTES = 6 << 20


def world_from_args(args: argparse.Namespace) -> LocalWorld:
    ports = WorldPorts(
        primary_openwire=getattr(args, "primary_openwire", 61616),
        primary_stomp=getattr(args, "primary_stomp", 61613),
        dr_openwire=getattr(args, "dr_openwire", 62616),
        dr_stomp=getattr(args, "dr_stomp", 62613),
        aws=getattr(args, "aws_port", 5005),
    )
    state_dir = Path(args.state_dir)
    env_file = state_dir / "env.json"
    if args.local_command != "up" and env_file.exists():
        ports = _ports_from_env(env_file, ports)
    return LocalWorld(load_topology(args.topology), state_dir, ports)


def _ports_from_env(env_file: Path, default: WorldPorts) -> WorldPorts:
    """`down` and `status` act on the ports `up` used, whatever flags they were given."""
    try:
        return ports_from_env(json.loads(env_file.read_text()))
    except (OSError, ValueError, KeyError, IndexError):
        return default


def run_sync(args: argparse.Namespace) -> int:
    from brokersync_local.sync import SyncWorkers, format_status  # noqa: PLC0415

    try:
        args.local_command = "status"
        workers = SyncWorkers(world_from_args(args), Path(args.topology))
        if args.sync_command == "start":
            workers.start()
        elif args.sync_command == "stop":
            workers.stop()
        else:
            print(format_status(workers.status()))
    except LocalWorldError as e:
        print(f"brokersync sync: {e}", file=sys.stderr)
        return 1
    return 0


def deploy_into(world: LocalWorld) -> Path:
    """What sam deploy creates, in the world's moto; returns the sam local invoke env-vars file."""
    from brokersync_local.deploy import SAM_ENV_VARS, deploy, register_brokers  # noqa: PLC0415

    env = world.read_env()
    endpoint, region = env["aws"]["endpoint"], env["aws"]["region"]
    ids = register_brokers(world.topology, endpoint, region)
    deploy(world.topology, world.state_dir, endpoint, region, broker_ids=ids)
    return world.state_dir / SAM_ENV_VARS


def read_event(path: Path) -> Any:
    """The event a function is invoked with: any JSON document, as ``sam local invoke --event`` takes.

    Read as every file a user names is (:func:`read_text_file`), bounded by what Lambda takes.
    """
    try:
        return json.loads(read_text_file(path, limit=LAMBDA_PAYLOAD_BYTES))
    except OSError as e:
        raise LocalWorldError(f"cannot read the event file {path}: {e.strerror or e}") from e
    except ValueError as e:  # larger than Lambda takes, not UTF-8, or not JSON
        raise LocalWorldError(f"the event file {path} is not JSON: {e}") from e


def invoke(world: LocalWorld, function: str, event_file: str | None, build_dir: str) -> int:
    from brokersync.ledger.schema import load_template  # noqa: PLC0415
    from brokersync_local.built_functions import SAMPLE_EVENTS, invoke_built, runtime_python  # noqa: PLC0415
    from brokersync_local.deploy import PAIR_NAME, SAM_ENV_VARS, TEMPLATE  # noqa: PLC0415

    env_vars_file = world.state_dir / SAM_ENV_VARS
    if not env_vars_file.exists():
        raise LocalWorldError(f"{env_vars_file} is missing: run brokersync local deploy first")
    if function not in SAMPLE_EVENTS:
        names = ", ".join(sorted(SAMPLE_EVENTS))
        raise LocalWorldError(f"no function {function!r} in the template; functions: {names}")
    python = runtime_python()
    if python is None:
        raise LocalWorldError("python3.13 (the functions' runtime) is not installed")
    event = read_event(Path(event_file or SAMPLE_EVENTS[function]))
    outcome = invoke_built(
        Path(build_dir), load_template(TEMPLATE), function, event, json.loads(env_vars_file.read_text()),
        python=python, region=world.read_env()["aws"]["region"], refs={"PairName": PAIR_NAME},
    )  # fmt: skip
    print(outcome.logs, file=sys.stderr, end="")
    if outcome.failed:
        print(json.dumps({"errorType": outcome.error_type, "errorMessage": outcome.error_message}))
        return 1
    print(json.dumps(outcome.result, indent=2))
    return 0


def run(args: argparse.Namespace) -> int:
    try:
        world = world_from_args(args)
        if args.local_command == "up":
            world.up(timeout_s=args.timeout)
        elif args.local_command == "deploy":
            print(f"deployed; sam local invoke --env-vars {deploy_into(world)}")
        elif args.local_command == "invoke":
            return invoke(world, args.function, args.event, args.build_dir)
        elif args.local_command == "down":
            world.down()
        else:
            states = world.status()
            for key, state in states.items():
                details = " ".join(f"{k}={v}" for k, v in state.items() if k != "state")
                print(f"{key:8} {state['state']:28} {details}")
            # The exit code says it too (0: everything running), for scripts and CI.
            return 0 if all(state["state"] == "running" for state in states.values()) else 1
    except LocalWorldError as e:
        print(f"brokersync local: {e}", file=sys.stderr)
        return 1
    return 0
