"""The tasks of the failover, failback and queue-move state machines: one action per invocation.

A thin adapter: the event names the action and carries the context the state machine keeps
(``ctx``), parsed into a :class:`~brokersync.failover.context.TransitionContext` before any
step runs; :mod:`brokersync.failover.steps` does the work. Errors keep their class names,
which the state machines' Retry and Catch match (``SwitchoverRefusedError`` is never retried).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.utilities.typing import LambdaContext

from brokersync.config import runtime_topology
from brokersync.failover.context import TransitionContext
from brokersync.failover.errors import FailoverRequestError
from brokersync.failover.move import MoveContext, QueueMove
from brokersync.failover.steps import FailoverSteps
from brokersync.invocation import event_object
from brokersync.runtime import failover_environment
from brokersync.topology import Role

logger = Logger()
metrics = Metrics()

STEPS = FailoverSteps(failover_environment(runtime_topology(), metrics))
MOVE = QueueMove(STEPS.env)


def _plan(event: dict[str, Any], execution: str) -> dict[str, Any]:
    return STEPS.plan(event.get("request"), execution).to_wire()


def _plan_failback(event: dict[str, Any], execution: str) -> dict[str, Any]:
    return STEPS.plan_failback(event.get("request"), execution).to_wire()


#: Steps that plan: they read the request, not a context.
_PLANNING: dict[str, Callable[[dict[str, Any], str], dict[str, Any]]] = {
    "plan": _plan,
    "planFailback": _plan_failback,
    "planMove": lambda event, _execution: MOVE.plan(event.get("request")).to_wire(),
}

#: Steps that act on a plan: ``ctx`` is parsed into a TransitionContext before they run.
_ACTIONS: dict[str, Callable[[dict[str, Any], TransitionContext, str], dict[str, Any]]] = {
    "drainStatus": lambda _e, ctx, _x: STEPS.drain_status(ctx),
    "stopSync": lambda _e, ctx, x: STEPS.stop_sync(ctx, x),
    "saveConfiguration": lambda e, ctx, x: STEPS.save_configuration(ctx, _broker(e, ctx), x),
    "applyConfiguration": lambda e, ctx, _x: STEPS.apply_configuration(ctx, _broker(e, ctx), _role(e)),
    "reboot": lambda e, ctx, _x: STEPS.reboot(ctx, list(e.get("applied") or [])),
    "brokerStates": lambda e, ctx, _x: STEPS.broker_states(ctx, [str(b) for b in e.get("brokers") or []]),
    "promote": lambda _e, ctx, _x: STEPS.promote(ctx),
    "swapRoles": lambda _e, ctx, x: STEPS.swap_roles(ctx, x),
    "startSync": lambda _e, ctx, x: STEPS.start_sync(ctx, x),
    "removeConsumed": lambda e, ctx, _x: STEPS.remove_consumed(ctx, float(e.get("maxSeconds", 30))),
    "complete": lambda _e, ctx, _x: STEPS.complete(ctx),
}


#: The queue move's steps: ``ctx`` is a MoveContext (one queue, not the pair).
_MOVES: dict[str, Callable[[dict[str, Any], MoveContext, str], dict[str, Any]]] = {
    "moveStatus": lambda _e, ctx, _x: MOVE.status(ctx),
    "flipQueue": lambda _e, ctx, x: MOVE.flip(ctx, x),
    "completeMove": lambda _e, ctx, _x: MOVE.complete(ctx),
}


#: What a step's event looks like, for an operator who invokes the function by hand.
_EXAMPLE = {"action": "planMove", "request": {"queue": "<active-active queue>", "to": "<broker>"}}


def _broker(event: dict[str, Any], ctx: TransitionContext) -> str:
    broker = str(event.get("broker"))
    if broker not in (ctx.source, ctx.target):
        raise FailoverRequestError(f"broker {broker!r} is neither the source nor the target of this transition")
    return broker


def _role(event: dict[str, Any]) -> Role:
    role = event.get("role")
    if role not in ("primary", "dr"):
        raise FailoverRequestError(f"role must be primary or dr, got {role!r}")
    return role  # type: ignore[return-value]


@logger.inject_lambda_context
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    event_object(event, _EXAMPLE, error=FailoverRequestError)  # refused before any step reads it
    action = str(event.get("action"))
    execution = str(event.get("execution", "manual"))
    logger.info("failover step", action=action, execution=execution)
    if action in _PLANNING:
        return _PLANNING[action](event, execution)
    if action in _MOVES:
        return _MOVES[action](event, MOVE.context(event.get("ctx")), execution)
    if action not in _ACTIONS:
        known = sorted({*_PLANNING, *_ACTIONS, *_MOVES})
        raise FailoverRequestError(f"unknown action {action!r}; one of {known}")
    return _ACTIONS[action](event, STEPS.context(event.get("ctx")), execution)
