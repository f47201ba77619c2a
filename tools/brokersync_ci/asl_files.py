"""Write each state machine's substituted definition to a folder, for asl-validator in CI.

``python -m brokersync_local.asl_files DIR`` writes ``DIR/<LogicalId>.asl.json`` for every
state machine in ``template.yaml``; functions a definition calls get a well-formed ARN of
the region and account CloudFormation would fill in.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from brokersync.ledger.schema import load_template
from brokersync_local.template_model import default_refs, state_machines, substituted_definition

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE_ARN = "arn:aws:lambda:us-east-1:111122223333:function:brokersync-{}"


def write_definitions(out: Path, template_path: Path = ROOT / "template.yaml") -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    written = []
    template = load_template(template_path)
    refs = default_refs(template, "us-east-1", "111122223333", "brokersync")
    for logical_id, properties in state_machines(template).items():
        definition = substituted_definition(properties, template_path.parent, EXAMPLE_ARN.format, refs)
        path = out / f"{logical_id}.asl.json"
        path.write_text(json.dumps(definition, indent=2), encoding="utf-8")
        written.append(path)
    return written


if __name__ == "__main__":
    for written_path in write_definitions(Path(sys.argv[1])):
        sys.stdout.write(f"{written_path}\n")
