"""Stopping and starting sync: the relay schedule, the receipts trigger and the purge loop.

A failover must stop sync before it touches a broker (a purge pass against a broker being
reconfigured proves nothing) and start it again once roles are swapped. The role record's
``sync_running`` flag is what every loop in both regions obeys; the switches here are this
region's resources, kept in step with it so that nothing runs only to idle. Stopping twice
or starting twice is harmless: a rule is enabled or not, a mapping is enabled or not, and
the purge loop is started only when no execution of it is running.

The purge loop must run in the region whose broker plays DR, which after a failover is not
the region the failover ran in. Its state machine has the same name in both regions
(``brokersync-<PairName>-purge-loop``), so :meth:`SyncControl.start` starts it in the DR
broker's region; when that region cannot be reached (it is the one that was lost) the start
reports so and the failback, run once it returns, starts it there.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ConnectionError as EndpointUnreachableError
from botocore.exceptions import ReadTimeoutError


@dataclass(frozen=True)
class SyncSwitches:
    #: EventBridge rule that schedules the relay (the template names it).
    relay_rule: str | None
    #: Function whose Amazon MQ event source mappings feed receipts into the ledger.
    receipts_function: str | None
    #: The purge loop state machine.
    purge_loop_arn: str | None


#: Why a failover leaves the other region's purge loop alone (what StartSync reports).
FAILBACK_STARTS = "the DR broker is the one lost; the failback that rejoins it starts its purge loop"


def in_region(arn: str, region: str) -> str:
    """The same resource ARN in another region (names are the same in both stacks of a pair)."""
    parts = arn.split(":")
    return ":".join([*parts[:3], region, *parts[4:]])


class SyncControl:
    def __init__(
        self,
        switches: SyncSwitches,
        events: Any,
        lambda_: Any,
        sfn: Any,
        regional_sfn: Callable[[str], Any] | None = None,
    ) -> None:
        self.switches = switches
        self.events = events
        self.lambda_ = lambda_
        self.sfn = sfn
        self.regional_sfn = regional_sfn

    def _mappings(self) -> list[dict[str, Any]]:
        if not self.switches.receipts_function:
            return []
        pages = self.lambda_.get_paginator("list_event_source_mappings").paginate(
            FunctionName=self.switches.receipts_function
        )
        return [m for page in pages for m in page["EventSourceMappings"]]

    def _running_loops(self, sfn: Any = None, arn: str | None = None) -> list[str]:
        sfn, arn = sfn or self.sfn, arn or self.switches.purge_loop_arn
        if not arn:
            return []
        pages = sfn.get_paginator("list_executions").paginate(stateMachineArn=arn, statusFilter="RUNNING")
        return [e["executionArn"] for page in pages for e in page["executions"]]

    def _loops_still_running(self, sfn: Any, arn: str) -> list[str]:
        """Running loops, each confirmed by DescribeExecution.

        ListExecutions is eventually consistent: the loop StopSync stopped seconds earlier can
        still be listed as RUNNING, and StartSync would then start none, leaving the new DR
        broker with no purge at all after a switchover. DescribeExecution is not.
        """
        return [
            e for e in self._running_loops(sfn, arn) if sfn.describe_execution(executionArn=e)["status"] == "RUNNING"
        ]

    def purge_loop_running(self) -> bool:
        """Does an execution of this region's purge loop run (confirmed, not only listed)?"""
        arn = self.switches.purge_loop_arn
        return bool(arn) and bool(self._loops_still_running(self.sfn, arn))  # type: ignore[arg-type]

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

    def start(self, dr_region: str | None = None, *, remote_loop: bool = True) -> dict[str, Any]:
        """Enable this region's triggers and make sure a purge loop runs in ``dr_region``.

        ``dr_region`` is the region of the broker that plays DR now; None (a broker that
        names no region) means this region. ``remote_loop=False`` (a failover) leaves a loop
        in another region to the failback: the DR broker there is the one just lost, nothing
        can be purged on it until the failback rejoins it (and starts the loop), and its
        region may be the one that is gone, where every call only costs RTO.
        """
        if self.switches.relay_rule:
            self.events.enable_rule(Name=self.switches.relay_rule)
        mappings = self._mappings()
        for mapping in mappings:
            self.lambda_.update_event_source_mapping(UUID=mapping["UUID"], Enabled=True)
        result: dict[str, Any] = {"relayRule": self.switches.relay_rule, "mappings": len(mappings)}
        return result | self._start_loop(dr_region, remote_loop)

    def ensure_purge_loop(self, region: str | None) -> dict[str, Any]:
        """A purge loop running in ``region`` (None: this one), started unless one runs: a queue
        moved to the DR broker is purged on the primary, by the primary region's loop."""
        return self._start_loop(region)

    def _start_loop(self, dr_region: str | None, remote_loop: bool = True) -> dict[str, Any]:
        arn = self.switches.purge_loop_arn
        if not arn:
            return {"purgeLoopStarted": None}
        sfn = self.sfn
        if dr_region and self.regional_sfn is not None and arn.split(":")[3] != dr_region:
            if not remote_loop:
                return {"purgeLoopStarted": None, "purgeLoopRegion": dr_region, "purgeLoopDeferred": FAILBACK_STARTS}
            arn, sfn = in_region(arn, dr_region), self.regional_sfn(dr_region)
        try:
            if self._loops_still_running(sfn, arn):
                return {"purgeLoopStarted": None, "purgeLoopRegion": arn.split(":")[3]}
            started = sfn.start_execution(
                stateMachineArn=arn,
                name=f"purge-loop-{uuid.uuid4()}",  # unique, as execution names must be for 90 days
                input=json.dumps({"iteration": 0}),
            )["executionArn"]
        except (EndpointUnreachableError, ReadTimeoutError) as e:
            # The DR broker's region is the one that was lost: nothing to purge until it returns,
            # and the failback that brings it back starts the loop there.
            return {"purgeLoopStarted": None, "purgeLoopRegion": arn.split(":")[3], "purgeLoopUnreachable": str(e)}
        return {"purgeLoopStarted": started, "purgeLoopRegion": arn.split(":")[3]}
