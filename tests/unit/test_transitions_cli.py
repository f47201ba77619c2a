"""brokersync switchover|failover|failback --plan: the steps in order, the cost now, and what is refused."""

from __future__ import annotations

from pathlib import Path

from brokersync_cli.status import PairStatus
from brokersync_cli.transitions import plan, step_names

ROOT = Path(__file__).resolve().parents[2]
FAILOVER_ASL = (ROOT / "statemachines" / "failover.asl.json").read_text()
MACHINE = {"stateMachineArn": "arn:aws:states:us-west-2:111122223333:stateMachine:brokersync-failover-x", "name": "x"}


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
