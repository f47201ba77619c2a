"""The whole-number field type of every input BrokerSync parses (topology file, execution input).

pydantic's lax ints take JSON and YAML ``true`` as 1 and ``false`` as 0. A number field set to
a boolean is a mistake in the input, and read as 1 it is a quiet one: ``memory_limit_mb: true``
would be a 1 MB DR queue (the purge then reaches nothing), ``"drainTimeoutSeconds": true`` a
one-second drain. So such fields refuse booleans and name the field, as any other bad value.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BeforeValidator


def not_a_bool(value: object) -> object:
    """``value``, unless it is a boolean (a before-validator: pydantic turns the ValueError into the field's error)."""
    if isinstance(value, bool):
        raise ValueError("must be a whole number, not true or false")  # noqa: TRY004 (pydantic reports only ValueError)
    return value


#: An int field that refuses booleans; numeric text and integral floats are taken as pydantic takes them.
WholeNumber = Annotated[int, BeforeValidator(not_a_bool)]
