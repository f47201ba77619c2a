"""Stand-in: StartExecution without a name gets a fresh one, as Step Functions gives it.

Step Functions names an execution started without ``name`` with a new UUID, so a state
machine can be started that way any number of times. moto's Step Functions engine names it
``None`` instead: the second such start of the same state machine was refused with
``ExecutionAlreadyExists``, so in the local world ``brokersync move-queue`` (or a purge loop
started again by hand) worked once and never again. This patches
``StepFunctionsParserBackend.start_execution`` (a private moto API: moto is pinned in
pyproject.toml) to supply the UUID; an execution started with a name is untouched, with
moto's own checks on it.
"""

from __future__ import annotations

import uuid
from typing import Any

from moto.stepfunctions.parser.models import StepFunctionsParserBackend


def install() -> None:
    original = StepFunctionsParserBackend.start_execution
    if getattr(original, "names_unnamed", False):
        return

    def start_execution(
        self: StepFunctionsParserBackend, state_machine_arn: str, name: Any = None, *args: Any, **kwargs: Any
    ) -> Any:
        return original(self, state_machine_arn, name or str(uuid.uuid4()), *args, **kwargs)

    start_execution.names_unnamed = True  # type: ignore[attr-defined]
    StepFunctionsParserBackend.start_execution = start_execution  # type: ignore[method-assign]
