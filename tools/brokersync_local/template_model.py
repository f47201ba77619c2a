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


def substituted_definition(
    properties: dict[str, Any], root: Path, resolve_get_att: Callable[[str], str]
) -> dict[str, Any]:
    """The definition as Step Functions receives it; every placeholder must have a substitution."""
    text = (root / properties["DefinitionUri"]).read_text(encoding="utf-8")
    for key, value in properties.get("DefinitionSubstitutions", {}).items():
        target = get_att_target(value)
        text = text.replace(f"${{{key}}}", resolve_get_att(target) if target else str(value))
    left = sorted(set(_PLACEHOLDER.findall(text)))
    if left:
        raise TemplateModelError(f"{properties['DefinitionUri']}: no DefinitionSubstitutions for {', '.join(left)}")
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise TemplateModelError(f"{properties['DefinitionUri']} is not JSON once substituted: {e}") from e
