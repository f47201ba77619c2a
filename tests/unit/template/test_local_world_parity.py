"""The local world deploys what template.yaml deploys: same ASL files, same substitutions, same table.

Everything compared here is parsed from template.yaml at test time, so a change to the
template that the local world does not follow fails this file.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto.server import ThreadedMotoServer

from brokersync.ledger.schema import load_template
from brokersync.topology import load_topology
from brokersync_local.deploy import LEDGER_TABLE, PAIR_NAME, deploy
from brokersync_local.ports import free_port
from brokersync_local.template_model import (
    TemplateModelError,
    called_functions,
    default_refs,
    state_machines,
    substituted_definition,
)

REGION = "us-west-2"


@pytest.fixture(scope="module")
def template(project_root: Path) -> dict[str, Any]:
    return load_template(project_root / "template.yaml")


@pytest.fixture(scope="module")
def deployed(topology_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, str]]]:
    """A moto server with the local world's deployment in it: (endpoint, machine ARNs by logical id)."""
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    try:
        machines = deploy(load_topology(topology_path), tmp_path_factory.mktemp("deploy"), endpoint, REGION)
        yield endpoint, machines
    finally:
        server.stop()


def _client(name: str, endpoint: str) -> Any:
    return boto3.client(
        name, endpoint_url=endpoint, region_name=REGION, aws_access_key_id="l", aws_secret_access_key="l"
    )


def test_every_state_machine_of_the_template_is_created_locally(
    template: dict[str, Any], deployed: tuple[str, dict[str, str]]
) -> None:
    assert set(deployed[1]) == set(state_machines(template))


def test_each_local_definition_is_the_template_asl_with_the_template_substitutions(
    template: dict[str, Any], deployed: tuple[str, dict[str, str]], project_root: Path
) -> None:
    endpoint, machines = deployed
    sfn, lam = _client("stepfunctions", endpoint), _client("lambda", endpoint)
    arns = {logical_id: lam.get_function(FunctionName=f"brokersync-{logical_id}")["Configuration"]["FunctionArn"]
            for logical_id in called_functions(template)}  # fmt: skip

    refs = default_refs(template, REGION, "123456789012", "local") | {"PairName": PAIR_NAME}
    for logical_id, properties in state_machines(template).items():
        local = json.loads(sfn.describe_state_machine(stateMachineArn=machines[logical_id])["definition"])

        assert local == substituted_definition(properties, project_root, arns.__getitem__, refs), logical_id


def test_each_function_a_state_machine_calls_runs_the_handler_of_its_code_uri(
    template: dict[str, Any], deployed: tuple[str, dict[str, str]]
) -> None:
    lam = _client("lambda", deployed[0])
    for logical_id in called_functions(template):
        code_uri = template["Resources"][logical_id]["Properties"]["CodeUri"]
        variables = lam.get_function_configuration(FunctionName=f"brokersync-{logical_id}")["Environment"]["Variables"]

        assert variables["BROKERSYNC_HANDLER"] == Path(code_uri).name


def test_the_local_ledger_table_is_the_template_definition(
    template: dict[str, Any], deployed: tuple[str, dict[str, str]]
) -> None:
    dynamodb = _client("dynamodb", deployed[0])
    wanted = template["Resources"]["Ledger"]["Properties"]

    table = dynamodb.describe_table(TableName=LEDGER_TABLE)["Table"]
    ttl = dynamodb.describe_time_to_live(TableName=LEDGER_TABLE)["TimeToLiveDescription"]

    assert table["KeySchema"] == wanted["KeySchema"]
    assert sorted(table["AttributeDefinitions"], key=str) == sorted(wanted["AttributeDefinitions"], key=str)
    assert table["BillingModeSummary"]["BillingMode"] == wanted["BillingMode"]
    assert (ttl["TimeToLiveStatus"], ttl["AttributeName"]) == (
        "ENABLED",
        wanted["TimeToLiveSpecification"]["AttributeName"],
    )


def test_a_placeholder_without_a_substitution_is_refused(tmp_path: Path) -> None:
    (tmp_path / "machine.asl.json").write_text(
        '{"StartAt": "A", "States": {"A": {"Type": "Wait", "Seconds": ${Gap}, "End": true}}}'
    )

    with pytest.raises(TemplateModelError, match="no DefinitionSubstitutions for Gap"):
        substituted_definition({"DefinitionUri": "machine.asl.json"}, tmp_path, str)
