"""Creating the ledger table from ``template.yaml``'s own definition.

Tests and the local world create exactly the table the template deploys: the key schema,
attribute definitions and TTL come from the ``Ledger`` resource, parsed rather than copied.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

LEDGER_RESOURCE = "Ledger"


class _CloudFormationLoader(yaml.SafeLoader):
    """A YAML loader that reads CloudFormation short-form tags (!Ref, !Sub, ...) as plain data."""


def _tag(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> Any:
    if isinstance(node, yaml.ScalarNode):
        value: Any = loader.construct_scalar(node)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)  # type: ignore[arg-type]
    return {f"Fn::{suffix}" if suffix != "Ref" else "Ref": value}


_CloudFormationLoader.add_multi_constructor("!", _tag)


def load_template(path: str | Path) -> dict[str, Any]:
    return yaml.load(Path(path).read_text(encoding="utf-8"), Loader=_CloudFormationLoader)  # noqa: S506 (safe loader subclass)


def ledger_table_definition(template: dict[str, Any]) -> dict[str, Any]:
    """``create_table`` arguments equivalent to the template's global table (one region's replica)."""
    properties = template["Resources"][LEDGER_RESOURCE]["Properties"]
    definition = {
        "KeySchema": properties["KeySchema"],
        "AttributeDefinitions": properties["AttributeDefinitions"],
        "BillingMode": properties.get("BillingMode", "PAY_PER_REQUEST"),
    }
    stream = properties.get("StreamSpecification")
    if stream:  # what a global table replicates from; the local replication stand-in reads it too
        definition["StreamSpecification"] = {"StreamEnabled": True, "StreamViewType": stream["StreamViewType"]}
    return definition


def ledger_ttl_attribute(template: dict[str, Any]) -> str:
    return template["Resources"][LEDGER_RESOURCE]["Properties"]["TimeToLiveSpecification"]["AttributeName"]


def create_ledger_table(client: Any, table_name: str, template_path: str | Path) -> None:
    """Create the table (and enable TTL) as the template defines it; a no-op if it exists."""
    template = load_template(template_path)
    existing = client.list_tables().get("TableNames", [])
    if table_name not in existing:
        client.create_table(TableName=table_name, **ledger_table_definition(template))
        client.get_waiter("table_exists").wait(TableName=table_name)
    client.update_time_to_live(
        TableName=table_name,
        TimeToLiveSpecification={"Enabled": True, "AttributeName": ledger_ttl_attribute(template)},
    )
