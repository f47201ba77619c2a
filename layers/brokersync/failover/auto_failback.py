"""Starting the failback by itself when an old primary is back (opt-in: ``AutoFailback=true``).

The health probe finds a broker the role record calls DR still running the primary
configuration. With the setting on, it starts the failback state machine for it, once per
role epoch: the execution name carries the epoch, and Step Functions refuses a second
execution of that name, so probes every minute (or in two regions) start one failback, not
one a minute.
"""

from __future__ import annotations

import json
from typing import Any

from brokersync.failover.context import DEFAULT_RUNNING_TIMEOUT_S


def start_failback_once(sfn: Any, state_machine_arn: str, epoch: int) -> str:
    """The ARN of this epoch's failback execution, started now or by an earlier probe.

    Step Functions answers a repeated start of a running execution (same name and input)
    with that execution, and refuses one of a finished execution's name: either way there
    is one failback per epoch.
    """
    name = f"auto-failback-epoch-{epoch}"
    try:
        return str(
            sfn.start_execution(
                stateMachineArn=state_machine_arn,
                name=name,
                input=json.dumps({"runningTimeoutSeconds": DEFAULT_RUNNING_TIMEOUT_S}),
            )["executionArn"]
        )
    except sfn.exceptions.ExecutionAlreadyExists:
        return f"{state_machine_arn.replace(':stateMachine:', ':execution:')}:{name}"
