"""Stand-in: StopExecution reports ABORTED at once, as Step Functions does.

moto's engine only asks its worker to stop; the execution stays RUNNING until the task in
flight returns, which for a purge invocation that loops internally is seconds. A StartSync
in that window saw the stopped purge loop still running and started none, so after a
switchover the new DR broker had no purge at all. In AWS the status is ABORTED when
StopExecution returns (the Lambda invocation in flight still runs to its end, as here).
This patches ``Execution.stop`` and the worker's final status report in moto's
Step Functions parser (private moto APIs: moto is pinned in pyproject.toml).
"""

from __future__ import annotations

import datetime

from moto.stepfunctions.parser.api import ExecutionStatus
from moto.stepfunctions.parser.backend import execution as parser_execution


def install() -> None:
    original_stop = parser_execution.Execution.stop
    original_reflect = parser_execution.BaseExecutionWorkerCommunication._reflect_execution_status

    def stop(
        self: parser_execution.Execution, stop_date: datetime.datetime, error: str | None, cause: str | None
    ) -> None:
        original_stop(self, stop_date=stop_date, error=error, cause=cause)
        if self.exec_status == ExecutionStatus.RUNNING:
            self.exec_status = ExecutionStatus.ABORTED
            self.stop_date = stop_date

    def reflect(self: parser_execution.BaseExecutionWorkerCommunication) -> None:
        if self.execution.exec_status == ExecutionStatus.ABORTED:
            return  # stopped by StopExecution: its status and stop date stand
        original_reflect(self)

    parser_execution.Execution.stop = stop  # type: ignore[method-assign]
    parser_execution.BaseExecutionWorkerCommunication._reflect_execution_status = reflect  # type: ignore[method-assign]
