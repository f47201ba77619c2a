"""What a failover execution carries from step to step, and what starts one, as types.

The state machines keep the plan step's result (``$.plan.Payload``) and hand it to every
later step as ``ctx``; the execution input is the request. Both cross a process boundary as
JSON that anyone who can start an execution writes, so both are parsed here, once, into
frozen models: a misspelt field, a broker the topology does not have or a negative timeout
is a :class:`FailoverRequestError` naming the field (never retried), not a ``KeyError``
three steps later. Field names on the wire stay camelCase because the ASL reads them
(``$.plan.Payload.nothingToDo``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

from brokersync.failover.errors import FailoverRequestError
from brokersync.whole_numbers import WholeNumber

Mode = Literal["SWITCHOVER", "FAILOVER", "FAILBACK"]
MODES: tuple[Mode, ...] = ("SWITCHOVER", "FAILOVER", "FAILBACK")
DEFAULT_DRAIN_TIMEOUT_S = 300
DEFAULT_RUNNING_TIMEOUT_S = 900
#: A day: longer than any state machine's own TimeoutSeconds, so no sane input reaches it.
MAX_TIMEOUT_S = 86_400


class _Wire(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, frozen=True, extra="forbid")

    def to_wire(self) -> dict[str, Any]:
        return self.model_dump(by_alias=True)


_Model = TypeVar("_Model", bound=_Wire)


def _parse(model: type[_Model], raw: object, what: str) -> _Model:
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise FailoverRequestError(f"{what} must be a JSON object, got {type(raw).__name__}")
    try:
        return model.model_validate(dict(raw))
    except ValidationError as e:
        problems = "; ".join(f"{'.'.join(str(p) for p in err['loc']) or what}: {err['msg']}" for err in e.errors())
        raise FailoverRequestError(f"{what} is not valid: {problems}") from e


class TransitionRequest(_Wire):
    """The execution input of a failover, switchover or failback (all fields optional)."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, frozen=True, extra="forbid", str_strip_whitespace=True
    )

    mode: str = ""
    #: The broker to make primary; the one playing DR when omitted.
    target: str | None = None
    drain_timeout_seconds: WholeNumber = Field(DEFAULT_DRAIN_TIMEOUT_S, ge=0, le=MAX_TIMEOUT_S)
    running_timeout_seconds: WholeNumber = Field(DEFAULT_RUNNING_TIMEOUT_S, ge=0, le=MAX_TIMEOUT_S)

    @classmethod
    def parse(cls, raw: object) -> TransitionRequest:
        return _parse(cls, raw, "the request")


class TransitionContext(_Wire):
    """The plan of one transition: which broker leaves, which takes over, and its deadlines.

    A plan with ``nothing_to_do`` names the current primary as both source and target, so
    that every field is always present and every later step can rely on it.
    """

    nothing_to_do: bool
    mode: Mode
    source: str = Field(min_length=1)
    target: str = Field(min_length=1)
    crdr: bool
    transition_started_at_ms: WholeNumber = Field(ge=0)
    drain_deadline_ms: WholeNumber = Field(ge=0)
    running_deadline_ms: WholeNumber = Field(ge=0)
    #: A failback's: when the rejoining broker stopped being primary (the start of the transition
    #: that replaced it), read before the failback claimed the record; None when not known.
    source_left_at_ms: WholeNumber | None = Field(default=None, ge=0)

    @classmethod
    def parse(cls, raw: object, brokers: set[str]) -> TransitionContext:
        """The context a step received, refused unless it names brokers of ``brokers``."""
        ctx = _parse(cls, raw, "ctx")
        unknown = sorted({ctx.source, ctx.target} - brokers)
        if unknown:
            raise FailoverRequestError(
                f"ctx names brokers the topology does not have: {unknown} (has {sorted(brokers)})"
            )
        return ctx
