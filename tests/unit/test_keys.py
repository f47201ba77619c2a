"""Sync keys are validated strictly because they end up inside DR selectors."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from ulid import ULID

from brokersync.keys import (
    MAX_KEY_LENGTH,
    MESSAGE_ID_PATTERN,
    InvalidKeyError,
    is_valid_key,
    key_identity,
    key_kind,
    ulid_time_ms,
    validate_key,
)


def test_a_ulid_is_a_correlation_id_key() -> None:
    key = str(ULID())

    assert validate_key(key, "correlation-id") == key
    assert key_kind(key) == "correlation-id"


@pytest.mark.parametrize(
    "message_id",
    [
        "ID:vm-40237-1795342445090-7:1:-1:1:1",
        "ID:ip-10-0-1-23.ec2.internal-38123-1700000000000-3:1:1:1:42",
        # Apache.NMS.ActiveMQ (.NET) stamps its connection ids with DateTime.Now.Ticks
        "ID:WIN-BUILD01-49731-638681234567890123-0:0:1:1:7",
        # the Java client given a connectionIDPrefix: the prefix replaces ID:<host>
        "billing-app-37725-1795897540581-1:1:1:1:4",
    ],
)
def test_activemq_message_ids_are_message_id_keys(message_id: str) -> None:
    assert validate_key(message_id, "message-id") == message_id
    assert key_kind(message_id) == "message-id"


@pytest.mark.parametrize(
    "key",
    [
        "",
        "01JD5Z8K3M4N5P6Q7R8S9T0V1",
        "81JD5Z8K3M4N5P6Q7R8S9T0V1W",
        "01JD5Z8K3M4N5P6Q7R8S9T0VIL",
        "01JD5Z8K3M4N5P6Q7R8S9T0V1W'",
    ],
)
def test_anything_else_is_not_a_ulid(key: str) -> None:
    with pytest.raises(InvalidKeyError):
        validate_key(key, "correlation-id")


@given(st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=60))
def test_no_valid_key_contains_a_selector_metacharacter(text: str) -> None:
    for kind in ("correlation-id", "message-id"):
        try:
            key = validate_key(text, kind)
        except InvalidKeyError:
            continue
        assert not set(key) & set("'\"(), %\\\n\t")
        assert is_valid_key(key)


def test_the_ulid_timestamp_is_its_creation_time() -> None:
    ulid = ULID()

    assert ulid_time_ms(str(ulid)) == ulid.milliseconds


@pytest.mark.parametrize(
    "key",
    [
        "01JD5Z8K3M4N5P6Q7R8S9T0V1W\n",  # `$` would match before a trailing newline
        "01JD5Z8K3M4N5P6Q7R8S9T0V1\u017f",  # LATIN SMALL LETTER LONG S upper-cases to "S"
        "\u0131" + "1JD5Z8K3M4N5P6Q7R8S9T0V1W",  # DOTLESS I upper-cases to "I"
    ],
)
def test_a_ulid_must_be_the_whole_string_and_ascii(key: str) -> None:
    with pytest.raises(InvalidKeyError):
        validate_key(key, "correlation-id")


@pytest.mark.parametrize(
    "message_id",
    [
        "billing app-37725-1795897540581-1:1:1:1:4",
        "billing'app-37725-1795897540581-1:1:1:1:4",
        "billing,app-37725-1795897540581-1:1:1:1:4",
        "billing%app-37725-1795897540581-1:1:1:1:4",
        "app:x-37725-1795897540581-1:1:1:1:4",
    ],
)
def test_a_connection_id_prefix_is_held_to_the_characters_of_a_host_name(message_id: str) -> None:
    with pytest.raises(InvalidKeyError):
        validate_key(message_id, "message-id")


@pytest.mark.parametrize(
    "message_id",
    [
        "ID:vm-40237-1795342445090-7:1:-1:1:1\n",
        "ID:vm-4\u0663237-1795342445090-7:1:-1:1:1",  # ARABIC-INDIC DIGIT THREE is a \\d
    ],
)
def test_a_message_id_must_be_the_whole_string_and_ascii_digits(message_id: str) -> None:
    with pytest.raises(InvalidKeyError):
        validate_key(message_id, "message-id")


def test_a_lower_case_ulid_is_accepted_and_stored_upper_case() -> None:
    key = str(ULID())

    assert validate_key(key.lower(), "correlation-id") == key


@given(st.from_regex(MESSAGE_ID_PATTERN, fullmatch=True))
def test_every_message_id_the_pattern_accepts_fits_the_longest_key_and_reads_as_a_message_id(message_id: str) -> None:
    assert len(message_id) <= MAX_KEY_LENGTH
    assert key_kind(message_id) == "message-id"


MESSAGE_ID = "ID:vm-40237-1795342445090-7:1:-1:1:1"


def test_a_message_id_key_is_its_own_message_id() -> None:
    assert key_identity(MESSAGE_ID, "message-id", None) == (MESSAGE_ID, MESSAGE_ID)
    assert key_identity(MESSAGE_ID, "message-id", MESSAGE_ID) == (MESSAGE_ID, MESSAGE_ID)


def test_another_message_id_beside_a_message_id_key_is_refused() -> None:
    with pytest.raises(InvalidKeyError, match="differs from the message-id key"):
        key_identity(MESSAGE_ID, "message-id", MESSAGE_ID[:-1] + "2")


def test_a_ulid_keys_message_id_is_validated_and_may_be_absent() -> None:
    key = str(ULID())

    assert key_identity(key.lower(), "correlation-id", MESSAGE_ID) == (key, MESSAGE_ID)
    assert key_identity(key, "correlation-id", None) == (key, None)
    with pytest.raises(InvalidKeyError):
        key_identity(key, "correlation-id", "ID:x' OR '1'='1")
