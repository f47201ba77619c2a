"""``brokersync local up|down|status``: the CLI's adapter over :class:`LocalWorld`."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from brokersync.topology import load_topology
from brokersync_local.errors import LocalWorldError
from brokersync_local.world import LocalWorld, WorldPorts, ports_from_env


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


def run(args: argparse.Namespace) -> int:
    try:
        world = world_from_args(args)
        if args.local_command == "up":
            world.up(timeout_s=args.timeout)
        elif args.local_command == "down":
            world.down()
        else:
            for key, state in world.status().items():
                details = " ".join(f"{k}={v}" for k, v in state.items() if k != "state")
                print(f"{key:8} {state['state']:28} {details}")
    except LocalWorldError as e:
        print(f"brokersync local: {e}", file=sys.stderr)
        return 1
    return 0
