"""The local world's Lambda runs what ``sam deploy`` ships: the build, under the runtime's Python.

A function invoked through the local AWS endpoint runs in a process of its own, from ``sam
build``'s output for this machine, under python3.13 with nothing of the virtualenv importable,
as Lambda runs the deployed package.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest

from brokersync_local.function_code import HOST_BUILD_DIR
from brokersync_local.moto_server import MotoServer
from brokersync_local.world import WorldPorts
from tests.ports import shifted_ports

PORT = shifted_ports(WorldPorts(aws=5335)).aws
REGION = "us-east-1"


@pytest.fixture(scope="module")
def endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MotoServer]:
    with MotoServer(PORT, tmp_path_factory.mktemp("built-functions")) as server:
        yield server


def _children(pid: int) -> list[list[str]]:
    """The command lines of ``pid``'s child processes."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parent = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            if parent == pid:
                found.append((stat.parent / "cmdline").read_bytes().decode().split("\0")[:-1])
        except (OSError, IndexError, ValueError):
            continue
    return found


def test_an_invoked_function_runs_the_build_under_the_runtimes_python_alone(endpoint: MotoServer) -> None:
    session = boto3.Session(aws_access_key_id="local", aws_secret_access_key="local", region_name=REGION)
    client = session.client("lambda", endpoint_url=endpoint.endpoint)
    iam = session.client("iam", endpoint_url=endpoint.endpoint)
    role = iam.create_role(RoleName="built", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    client.create_function(
        FunctionName="export-config",
        Runtime="python3.13",
        Role=role,
        Handler="app.lambda_handler",
        Code={"ZipFile": b"PK\x05\x06" + b"\0" * 18},
        Environment={"Variables": {"BROKERSYNC_HANDLER": "export_config"}},
    )

    answer = client.invoke(FunctionName="export-config", Payload=json.dumps("not an object"))

    assert answer.get("FunctionError") == "Unhandled"  # the handler ran, and refused the event
    error = json.loads(answer["Payload"].read())
    runtimes = [c for c in _children(endpoint.pid or 0) if any(a.endswith("function_runtime.py") for a in c)]
    assert len(runtimes) == 1
    command = runtimes[0]
    assert Path(command[0]).name.startswith("python3.13") and command[1:4] == ["-I", "-S", "-u"]
    assert command[5:7] == [str(HOST_BUILD_DIR), "ExportConfigFunction"]
    assert command[-1] == str(HOST_BUILD_DIR / "BrokerSyncLayer" / "python")
    frames = "".join(error.get("stackTrace", []))
    assert str(HOST_BUILD_DIR) in frames and ".venv" not in frames
