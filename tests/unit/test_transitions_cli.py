"""brokersync switchover|failover|failback --plan: the steps in order, the cost now, and what is refused."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import boto3
import pytest
from ulid import ULID

from brokersync.broker.statistics import QueueStats
from brokersync.exceptions import BrokerUnavailableError
from brokersync.failover.steps import Transition, TransitionStore
from brokersync.ledger import dynamodb_ledger
from brokersync.ledger.control import ControlRecords, control_model
from brokersync.ledger.schema import create_ledger_table
from brokersync.topology import Broker, Topology, load_topology
from brokersync_cli.status import PairStatus, StatusReader
from brokersync_cli.transitions import execution_name, follow, plan, state_machine_checks, step_names

ROOT = Path(__file__).resolve().parents[2]
TABLE = "brokersync-orders-ledger"
FAILOVER_ASL = (ROOT / "statemachines" / "failover.asl.json").read_text()
MACHINE = {"stateMachineArn": "arn:aws:states:us-west-2:111122223333:stateMachine:brokersync-failover-x", "name": "x"}


@pytest.fixture
def topology(topology_path: Path, mocked_aws: None) -> Topology:
    for region in ("us-east-1", "us-west-2"):
        create_ledger_table(boto3.client("dynamodb", region_name=region), TABLE, ROOT / "template.yaml")
    return load_topology(topology_path)


def _records(region: str) -> ControlRecords:
    return ControlRecords(control_model(TABLE, region))


def _unreachable_broker(broker: Broker) -> object:
    raise BrokerUnavailableError(f"no STOMP endpoint of {broker.name} accepted a connection")


def _reader(topology: Topology) -> StatusReader:
    return StatusReader(topology, TABLE, credentials=_unreachable_broker)  # type: ignore[arg-type]


def _status(problems: list[str] | None = None, backlog: int = 7, pending: int = 40) -> PairStatus:
    health = {
        "queues": {
            "ORDERS": {
                "copy_backlog": backlog,
                "loss_window_s": 1.5,
                "pending_purge": pending,
                "duplicate_window_s": 1,
            },
            "AUDIT": {"copy_backlog": 0, "loss_window_s": 0.0, "pending_purge": None, "duplicate_window_s": None},
        }
    }
    return PairStatus("orders-use1", "orders-usw2", 4, True, {}, health, problems or [], [])


def test_the_steps_are_listed_in_the_order_the_execution_reaches_them() -> None:
    steps = step_names(FAILOVER_ASL)

    assert steps[0] == "Plan"
    assert steps.index("StopSync") < steps.index("SwapRoles") < steps.index("StartSync")


def test_a_failover_plan_costs_the_copy_backlog_in_loss_and_the_pending_purge_in_duplicates() -> None:
    planned = plan("failover", _status(), MACHINE, FAILOVER_ASL, "us-west-2")

    assert (planned["from"], planned["to"], planned["would_run_in"]) == ("orders-use1", "orders-usw2", "us-west-2")
    assert planned["now"]["lost_at_most"] == 7 and planned["now"]["duplicates_at_most"] == 40
    assert planned["input"] == {"mode": "FAILOVER"} and planned["refused"] is None


def test_a_switchover_costs_nothing_but_is_refused_when_the_primary_cannot_be_read() -> None:
    fine = plan("switchover", _status(), MACHINE, FAILOVER_ASL, "us-west-2")
    unreadable_primary = _status(["the primary cannot be read: refused"])
    unreadable = plan("switchover", unreadable_primary, MACHINE, FAILOVER_ASL, "us-west-2")

    assert (fine["now"]["lost_at_most"], fine["now"]["duplicates_at_most"], fine["refused"]) == (0, 0, None)
    assert "start a failover instead" in unreadable["refused"]


def test_any_transition_is_refused_while_another_is_half_done() -> None:
    half_done = "a FAILOVER to orders-usw2 is half done (exec-7): re-run it to finish"

    planned = plan("failback", _status([half_done]), MACHINE, FAILOVER_ASL, "us-east-1")

    assert planned["refused"] == half_done


def test_the_plan_refuses_with_the_state_machines_own_reason_for_another_modes_half_done_transition(
    topology: Topology,
) -> None:
    TransitionStore(_records("us-west-2")).write(Transition("FAILOVER", "orders-use1", "orders-usw2", "exec-7", 1))

    checks = state_machine_checks("switchover", _reader(topology), "us-west-2")

    assert checks["refused"] == (
        "a FAILOVER to orders-usw2 is in progress (exec-7): "
        "re-run it with mode FAILOVER (or finish it) before a SWITCHOVER"
    )


def test_the_plan_says_a_re_run_resumes_the_half_done_transition_of_the_same_mode(topology: Topology) -> None:
    TransitionStore(_records("us-west-2")).write(Transition("FAILOVER", "orders-use1", "orders-usw2", "exec-7", 1))

    checks = state_machine_checks("failover", _reader(topology), "us-west-2")

    assert checks == {"refused": None, "nothing_to_do": False, "resumes": "exec-7"}


def test_a_switchover_plan_is_refused_by_the_state_machines_probe_when_the_old_primary_does_not_answer(
    topology: Topology,
) -> None:
    checks = state_machine_checks("switchover", _reader(topology), "us-west-2")

    assert checks["refused"].startswith("the old primary orders-use1 is unreachable")
    assert "Start a FAILOVER instead" in checks["refused"]


def test_the_plan_writes_no_transition_record(topology: Topology) -> None:
    state_machine_checks("failover", _reader(topology), "us-west-2")
    state_machine_checks("failback", _reader(topology), "us-east-1")

    assert TransitionStore(_records("us-west-2")).read() is None
    assert TransitionStore(_records("us-east-1")).read() is None


def test_the_state_machines_refusal_comes_before_what_status_shows() -> None:
    checks = {"refused": "a FAILBACK to orders-use1 is still in progress (exec-9): re-run it first"}

    planned = plan("failover", _status(["the primary cannot be read: x"]), MACHINE, FAILOVER_ASL, "us-west-2", checks)

    assert planned["refused"] == checks["refused"]


class _DrainedOldPrimary:
    def __init__(self, connector: object) -> None:
        pass

    def queue_stats(self, names: list[str]) -> dict[str, QueueStats]:
        return {name: QueueStats(name, 0, 0, 0, 0, 0, 0, 0, "ID:use1-1", "orders-use1") for name in names}


def test_a_switchover_plan_waits_for_keys_still_on_their_way_from_the_old_primarys_region(
    topology: Topology, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("brokersync_cli.transitions.StatisticsClient", _DrainedOldPrimary)
    reader = StatusReader(topology, TABLE, credentials=lambda broker: None)  # type: ignore[arg-type,return-value]
    dynamodb_ledger(TABLE, region="us-east-1").record("ORDERS", [(str(ULID()), 1_795_340_000_000)])

    checks = state_machine_checks("switchover", reader, "us-west-2")

    assert checks["drain_now"]["drained"] is False
    waits = checks["drain_waits_for"]
    assert waits == ["1 consumed keys of ORDERS to reach this region's ledger replica and be purged"]


@pytest.mark.parametrize("command", ["switchover", "failover", "failback", "move-queue"])
def test_an_execution_the_cli_starts_is_named_for_its_command_within_step_functions_rules(command: str) -> None:
    name = execution_name(command)

    assert name.startswith(f"cli-{command}-") and name != execution_name(command)
    assert re.fullmatch(r"[A-Za-z0-9_-]{1,80}", name)


class PagedHistory:
    """Step Functions as AWS pages it: at most ``maxResults`` events a call, then a ``nextToken``."""

    def __init__(self, states: list[str], status: str = "RUNNING") -> None:
        self.events = [
            {"id": i + 1, "type": "TaskStateEntered", "stateEnteredEventDetails": {"name": name}}
            for i, name in enumerate(states)
        ]
        self.status = status

    def get_execution_history(self, **request: Any) -> dict[str, Any]:
        start, size = int(request.get("nextToken", 0)), min(request.get("maxResults", 100), 1000)
        page: dict[str, Any] = {"events": self.events[start : start + size]}
        if start + size < len(self.events):
            page["nextToken"] = str(start + size)
        return page

    def describe_execution(self, **_request: Any) -> dict[str, Any]:
        return {"status": self.status, "output": "{}"}


def test_following_an_execution_prints_the_steps_after_its_first_thousand_history_events() -> None:
    sfn = PagedHistory([*(["CheckDrained"] * 2_400), "StopSync", "RebootBoth", "Done"], status="SUCCEEDED")
    printed: list[str] = []

    outcome = follow(sfn, "arn:execution", timeout_s=60, progress=printed.append, sleep=lambda _s: None)

    assert outcome["status"] == "SUCCEEDED"
    assert len(printed) == 2_403
    assert [line.split()[-1] for line in printed[-3:]] == ["StopSync", "RebootBoth", "Done"]


def test_the_steps_an_execution_takes_as_it_ends_are_printed_before_its_outcome() -> None:
    sfn = PagedHistory(["Plan"])
    printed: list[str] = []

    def step_then_end(_s: float) -> None:
        sfn.events.append({"id": 2, "type": "SucceedStateEntered", "stateEnteredEventDetails": {"name": "Done"}})
        sfn.status = "SUCCEEDED"

    outcome = follow(sfn, "arn:execution", timeout_s=60, progress=printed.append, sleep=step_then_end)

    assert outcome["status"] == "SUCCEEDED"
    assert [line.split()[-1] for line in printed] == ["Plan", "Done"]
