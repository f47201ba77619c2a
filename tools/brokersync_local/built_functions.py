"""Running a function from ``sam build``'s output the way ``sam local invoke`` does, without Docker.

``sam local invoke`` needs a Docker engine and Lambda's image; neither is on every machine (CI's
has no engine). This is its stand-in, and the CI check that every function starts from what
``sam deploy`` ships: each invocation is a process of its own, under the runtime's Python
(python3.13), with only the build output on ``sys.path`` (:mod:`lambda_bootstrap`), the
environment composed as SAM composes it, and a sample event from ``events/``.

The environment follows SAM's rules for ``--env-vars``: the template's variables (Globals and
the function's own), overridden by the file's ``Parameters`` section and then by the section
named after the function, for the variables the template declares; anything else in the file
is ignored, as SAM ignores it. Lambda's own variables (region, credentials, function name) are
added as Lambda adds them.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from brokersync_ci.runtime_python import runtime_python
from brokersync_local.deploy import SAM_ENV_VARS, local_env_vars
from brokersync_local.template_model import TemplateModelError, resolve

__all__ = ["SAMPLE_EVENTS", "SAM_ENV_VARS", "BuiltInvocation", "invoke_built", "local_env_vars", "runtime_python"]

ROOT = Path(__file__).resolve().parents[2]
BOOTSTRAP = Path(__file__).with_name("lambda_bootstrap.py")
LAYER = "BrokerSyncLayer"
FUNCTION = "AWS::Serverless::Function"
#: The sample event of each function, in ``events/`` (what the docs' ``sam local invoke`` lines use).
SAMPLE_EVENTS = {
    "RelayAdvisoriesFunction": "events/relay-advisories.json",
    "RecordReceiptsFunction": "events/mq-receipts.json",
    "PurgeDrFunction": "events/purge-dr.json",
    "ExportConfigFunction": "events/export-config.json",
    "FailoverStepsFunction": "events/failover-steps-drain-status.json",
    "SnapshotQueuesFunction": "events/snapshot-queues.json",
    "RepairLedgerFunction": "events/repair-ledger.json",
    "HealthProbeFunction": "events/health-probe.json",
}


@dataclass
class BuiltInvocation:
    """One invocation's outcome: the handler's result, or Lambda's error shape, and what it imported."""

    result: Any = None
    error_type: str | None = None
    error_message: str = ""
    outside_modules: list[str] = field(default_factory=list)
    python: str = ""
    logs: str = ""

    @property
    def failed(self) -> bool:
        return self.error_type is not None


def functions(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {k: v for k, v in template["Resources"].items() if v["Type"] == FUNCTION}


def _no_get_att(logical_id: str) -> str:
    raise KeyError(logical_id)  # resources have no attributes before a deploy


def _resolved(value: Any, refs: dict[str, str]) -> str:
    """A template value as ``sam local`` resolves it: parameters and pseudo parameters; else empty."""
    try:
        return resolve(value, _no_get_att, refs)
    except (KeyError, TemplateModelError):
        return ""


def sam_environment(
    template: dict[str, Any], logical_id: str, env_vars: dict[str, Any], refs: dict[str, str]
) -> dict[str, str]:
    """The function's variables after SAM applies an ``--env-vars`` file (declared variables only)."""
    declared = dict(template.get("Globals", {}).get("Function", {}).get("Environment", {}).get("Variables", {}))
    own = functions(template)[logical_id]["Properties"].get("Environment", {}).get("Variables", {})
    declared.update(own)
    environment = {name: _resolved(value, refs) for name, value in declared.items()}
    for section in (env_vars.get("Parameters", {}), env_vars.get(logical_id, {})):
        environment.update({k: str(v) for k, v in section.items() if k in declared})
    return environment


def invoke_built(
    build_dir: Path,
    template: dict[str, Any],
    logical_id: str,
    event: Any,
    env_vars: dict[str, Any],
    *,
    python: str,
    region: str,
    refs: dict[str, str] | None = None,
) -> BuiltInvocation:
    """Run ``logical_id``'s handler from ``build_dir`` in a new ``python`` process; bounded by its Timeout."""
    properties = functions(template)[logical_id]["Properties"]
    globals_ = template.get("Globals", {}).get("Function", {})
    timeout_s = float(properties.get("Timeout", globals_.get("Timeout", 3)))
    memory = str(properties.get("MemorySize", globals_.get("MemorySize", 128)))
    build_dir = build_dir.resolve()
    code, layer = build_dir / logical_id, build_dir / LAYER / "python"
    for needed in (code, layer):
        if not needed.is_dir():
            raise FileNotFoundError(f"{needed} is missing: run make template-check (sam build) first")
    refs = {"AWS::Region": region, "AWS::AccountId": "123456789012", "AWS::Partition": "aws", **(refs or {})}
    environment = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "TZ": ":UTC",
        **sam_environment(template, logical_id, env_vars, refs),
        "AWS_REGION": region,
        "AWS_DEFAULT_REGION": region,
        "AWS_ACCESS_KEY_ID": "local",
        "AWS_SECRET_ACCESS_KEY": "local",  # moto takes any credentials
        "AWS_LAMBDA_FUNCTION_NAME": f"local-{logical_id}",
        "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": memory,
        "AWS_LAMBDA_FUNCTION_TIMEOUT": str(int(timeout_s)),
        "AWS_EXECUTION_ENV": "AWS_Lambda_python3.13",
        "LAMBDA_TASK_ROOT": str(code),
    }
    with tempfile.TemporaryDirectory(prefix="brokersync-invoke-") as scratch:
        event_file, out_file = Path(scratch) / "event.json", Path(scratch) / "out.json"
        event_file.write_text(json.dumps(event), encoding="utf-8")
        command = [python, "-I", "-S", str(BOOTSTRAP), str(code), str(layer), properties["Handler"],
                   str(event_file), str(timeout_s), str(out_file)]  # fmt: skip
        try:
            done = subprocess.run(
                command, env=environment, capture_output=True, text=True, timeout=timeout_s + 30, check=False
            )
        except subprocess.TimeoutExpired as e:
            return BuiltInvocation(error_type="Timeout", error_message=f"ran past {timeout_s + 30:.0f}s", logs=str(e))
        logs = done.stdout + done.stderr
        if not out_file.exists():
            return BuiltInvocation(error_type="Runtime.ExitError", error_message=f"exit {done.returncode}", logs=logs)
        out = json.loads(out_file.read_text(encoding="utf-8"))
    return BuiltInvocation(
        result=out.get("result"),
        error_type=out.get("errorType"),
        error_message=out.get("errorMessage", ""),
        outside_modules=out.get("outsideModules", []),
        python=out.get("python", ""),
        logs=logs,
    )
