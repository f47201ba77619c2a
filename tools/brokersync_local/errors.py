"""Errors of the local harness: each says what to do next."""

from __future__ import annotations


class LocalWorldError(Exception):
    """Something in the local world is not as `up` needs it."""


class PortTakenError(LocalWorldError):
    def __init__(self, port: int, purpose: str) -> None:
        self.port = port
        super().__init__(
            f"port {port} ({purpose}) is already in use by another process: stop it, or choose another port "
            f"(see `brokersync local up --help`)"
        )


class ProcessFailedError(LocalWorldError):
    """A process we started exited or never became ready; carries the tail of its log."""
