"""No secret reaches a log line, whatever the level and whichever library logs it."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator

import pytest

from brokersync import redaction

PASSWORD = "Correct-Horse-Battery-9"


@pytest.fixture
def captured() -> Iterator[io.StringIO]:
    redaction.install()
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        yield stream
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


def test_a_stomp_connect_frame_logged_by_stomp_py_loses_its_passcode(captured: io.StringIO) -> None:
    frame = ["CONNECT\n", "accept-version:1.2\n", "login:brokersync\n", f"passcode:{PASSWORD}\n", "\n"]
    logging.getLogger("stomp.py").debug("sending frame: %s", frame)

    assert PASSWORD not in captured.getvalue()
    assert "passcode:***" in captured.getvalue()


def test_a_secrets_manager_response_body_logged_by_botocore_loses_its_secret_string(captured: io.StringIO) -> None:
    body = (
        b'{"ARN":"arn:x","SecretString":"{\\"username\\":\\"brokersync\\",\\"password\\":\\"'
        + PASSWORD.encode()
        + b'\\"}"}'
    )
    logging.getLogger("botocore.parsers").debug("Response body:\n%r", body)

    assert PASSWORD not in captured.getvalue()
    assert "arn:x" in captured.getvalue()


def test_a_registered_password_is_masked_wherever_it_appears(captured: io.StringIO) -> None:
    redaction.register_secret(PASSWORD)

    logging.getLogger("anything.at.all").info("connecting with %s to the broker", PASSWORD)

    assert PASSWORD not in captured.getvalue()
    assert "connecting with *** to the broker" in captured.getvalue()


def test_values_shorter_than_amazon_mqs_minimum_password_are_not_registered() -> None:
    redaction.register_secret("local")

    assert redaction.redact("the local world") == "the local world"


def test_installing_twice_wraps_the_record_factory_once() -> None:
    redaction.install()
    factory = logging.getLogRecordFactory()

    redaction.install()

    assert logging.getLogRecordFactory() is factory
