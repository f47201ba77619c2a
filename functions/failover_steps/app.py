"""The tasks of the failover and failback state machines: one action per invocation.

A thin adapter: the event names the action and carries the context the state machine keeps
(``ctx``); :mod:`brokersync.failover.steps` does the work. Errors keep their class names,
which the state machines' Retry and Catch match (``SwitchoverRefusedError`` is never retried).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.utilities.typing import LambdaContext

from brokersync.config import runtime_topology
from brokersync.failover.errors import FailoverRequestError
from brokersync.failover.steps import FailoverSteps
from brokersync.runtime import failover_environment

logger = Logger()
metrics = Metrics()

STEPS = FailoverSteps(failover_environment(runtime_topology(), metrics))


_ACTIONS: dict[str, Callable[[dict[str, Any], dict[str, Any], str], dict[str, Any]]] = {
    "plan": lambda e, _ctx, x: STEPS.plan(e.get("request") or {}, x),
    "planFailback": lambda e, _ctx, x: STEPS.plan_failback(e.get("request") or {}, x),
    "drainStatus": lambda _e, ctx, _x: STEPS.drain_status(ctx),
    "stopSync": lambda _e, ctx, x: STEPS.stop_sync(ctx, x),
    "saveConfiguration": lambda e, ctx, x: STEPS.save_configuration(ctx, e["broker"], x),
    "applyConfiguration": lambda e, ctx, _x: STEPS.apply_configuration(ctx, e["broker"], e["role"]),
    "reboot": lambda e, ctx, _x: STEPS.reboot(ctx, e["applied"]),
    "brokerStates": lambda e, ctx, _x: STEPS.broker_states(ctx, e["brokers"]),
    "promote": lambda _e, ctx, _x: STEPS.promote(ctx),
    "swapRoles": lambda _e, ctx, x: STEPS.swap_roles(ctx, x),
    "startSync": lambda _e, ctx, _x: STEPS.start_sync(ctx),
    "removeConsumed": lambda e, ctx, _x: STEPS.remove_consumed(ctx, float(e.get("maxSeconds", 30))),
    "complete": lambda _e, ctx, _x: STEPS.complete(ctx),
}


@logger.inject_lambda_context
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    action = str(event.get("action"))
    logger.info("failover step", action=action, execution=event.get("execution"))
    if action not in _ACTIONS:
        raise FailoverRequestError(f"unknown action {action!r}; one of {sorted(_ACTIONS)}")
    return _ACTIONS[action](event, event.get("ctx") or {}, str(event.get("execution", "manual")))
