"""What ``template.yaml`` says about the state machines, read the way CloudFormation reads it.

The local world, the ASL check in CI and the tests all take a state machine's definition from
here: its ``DefinitionUri`` file with every ``DefinitionSubstitutions`` key replaced, so none of
them can drift from what ``sam deploy`` creates.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

STATE_MACHINE = "AWS::Serverless::StateMachine"
_PLACEHOLDER = re.compile(r"\$\{([A-Za-z0-9_.:]+)\}")


class TemplateModelError(ValueError):
    """A state machine's definition does not resolve as CloudFormation would resolve it."""


def state_machines(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each state machine's properties by logical id."""
    return {k: v["Properties"] for k, v in template["Resources"].items() if v["Type"] == STATE_MACHINE}


def get_att_target(value: Any) -> str | None:
    """The logical id a ``!GetAtt X.Arn`` substitution names (None for a plain value)."""
    if isinstance(value, dict) and "Fn::GetAtt" in value:
        target = value["Fn::GetAtt"]
        return target.split(".")[0] if isinstance(target, str) else str(target[0])
    return None


def called_functions(template: dict[str, Any]) -> set[str]:
    """The functions the state machines call, by logical id."""
    return {
        target
        for properties in state_machines(template).values()
        for value in properties.get("DefinitionSubstitutions", {}).values()
        if (target := get_att_target(value))
    }


def resolve(value: Any, resolve_get_att: Callable[[str], str], refs: dict[str, str]) -> str:
    """A substitution value as CloudFormation resolves it: ``!GetAtt X.Arn``, ``!Ref X``, ``!Sub "..."``.

    ``refs`` answers ``!Ref`` and ``${...}`` names: pseudo parameters, parameters, resources.
    """
    if target := get_att_target(value):
        return resolve_get_att(target)
    if isinstance(value, dict) and "Ref" in value:
        return refs[value["Ref"]]
    if isinstance(value, dict) and "Fn::Sub" in value:
        text = value["Fn::Sub"]
        if not isinstance(text, str):
            raise TemplateModelError(f"only the one-argument form of !Sub is supported here: {value}")
        return _PLACEHOLDER.sub(lambda m: refs[m.group(1)], text)
    if isinstance(value, dict):
        raise TemplateModelError(f"cannot resolve {value} outside CloudFormation")
    return str(value)


def default_refs(template: dict[str, Any], region: str, account: str, stack: str) -> dict[str, str]:
    """Pseudo parameters, parameter defaults, and a stack-scoped name for every resource."""
    refs = {"AWS::Region": region, "AWS::AccountId": account, "AWS::Partition": "aws", "AWS::StackName": stack}
    for name, spec in template.get("Parameters", {}).items():
        refs[name] = str(spec.get("Default", f"<{name}>"))
    for logical_id in template["Resources"]:
        refs.setdefault(logical_id, f"brokersync-{logical_id.lower()}-{stack}")
    return refs


def substituted_definition(
    properties: dict[str, Any],
    root: Path,
    resolve_get_att: Callable[[str], str],
    refs: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The definition as Step Functions receives it; every placeholder must have a substitution."""
    text = (root / properties["DefinitionUri"]).read_text(encoding="utf-8")
    for key, value in properties.get("DefinitionSubstitutions", {}).items():
        text = text.replace(f"${{{key}}}", resolve(value, resolve_get_att, refs or {}))
    left = sorted(set(_PLACEHOLDER.findall(text)))
    if left:
        raise TemplateModelError(f"{properties['DefinitionUri']}: no DefinitionSubstitutions for {', '.join(left)}")
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise TemplateModelError(f"{properties['DefinitionUri']} is not JSON once substituted: {e}") from e
