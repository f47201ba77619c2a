"""Stopping and starting sync: the relay schedule, the receipts trigger and the purge loop.

A failover must stop sync before it touches a broker (a purge pass against a broker being
reconfigured proves nothing) and start it again once roles are swapped. Each switch is a
resource of the regional stack, so stopping twice or starting twice is harmless: a rule is
enabled or not, a mapping is enabled or not, and the purge loop is started only when no
execution of it is running.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class SyncSwitches:
    #: EventBridge rule that schedules the relay (the template names it).
    relay_rule: str | None
    #: Function whose Amazon MQ event source mappings feed receipts into the ledger.
    receipts_function: str | None
    #: The purge loop state machine.
    purge_loop_arn: str | None


class SyncControl:
    def __init__(self, switches: SyncSwitches, events: Any, lambda_: Any, sfn: Any) -> None:
        self.switches = switches
        self.events = events
        self.lambda_ = lambda_
        self.sfn = sfn

    def _mappings(self) -> list[dict[str, Any]]:
        if not self.switches.receipts_function:
            return []
        pages = self.lambda_.get_paginator("list_event_source_mappings").paginate(
            FunctionName=self.switches.receipts_function
        )
        return [m for page in pages for m in page["EventSourceMappings"]]

    def _running_loops(self) -> list[str]:
        if not self.switches.purge_loop_arn:
            return []
        pages = self.sfn.get_paginator("list_executions").paginate(
            stateMachineArn=self.switches.purge_loop_arn, statusFilter="RUNNING"
        )
        return [e["executionArn"] for page in pages for e in page["executions"]]

    def _loops_still_running(self) -> list[str]:
        """Running loops, each confirmed by DescribeExecution.

        ListExecutions is eventually consistent: the loop StopSync stopped seconds earlier can
        still be listed as RUNNING, and StartSync would then start none, leaving the new DR
        broker with no purge at all after a switchover. DescribeExecution is not.
        """
        return [
            arn for arn in self._running_loops() if self.sfn.describe_execution(executionArn=arn)["status"] == "RUNNING"
        ]

    def stop(self, cause: str) -> dict[str, Any]:
        if self.switches.relay_rule:
            self.events.disable_rule(Name=self.switches.relay_rule)
        mappings = self._mappings()
        for mapping in mappings:
            self.lambda_.update_event_source_mapping(UUID=mapping["UUID"], Enabled=False)
        stopped = self._running_loops()
        for execution in stopped:
            self.sfn.stop_execution(executionArn=execution, error="SyncStopped", cause=cause[:256])
        return {"relayRule": self.switches.relay_rule, "mappings": len(mappings), "purgeLoopsStopped": len(stopped)}

    def start(self) -> dict[str, Any]:
        if self.switches.relay_rule:
            self.events.enable_rule(Name=self.switches.relay_rule)
        mappings = self._mappings()
        for mapping in mappings:
            self.lambda_.update_event_source_mapping(UUID=mapping["UUID"], Enabled=True)
        started = None
        if self.switches.purge_loop_arn and not self._loops_still_running():
            started = self.sfn.start_execution(
                stateMachineArn=self.switches.purge_loop_arn,
                name=f"purge-loop-{uuid.uuid4()}",  # unique, as execution names must be for 90 days
                input=json.dumps({"iteration": 0}),
            )["executionArn"]
        return {"relayRule": self.switches.relay_rule, "mappings": len(mappings), "purgeLoopStarted": started}
