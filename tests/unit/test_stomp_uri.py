"""A STOMP endpoint is parsed whole, or refused with the endpoint named."""

from __future__ import annotations

import pytest

from brokersync.broker.stomp import StompConnector, StompEndpoint, parse_stomp_uri


@pytest.mark.parametrize(
    ("uri", "endpoint"),
    [
        ("stomp+ssl://b-1.mq.amazonaws.com:61614", StompEndpoint("b-1.mq.amazonaws.com", 61614, True)),
        ("stomp+nio+ssl://10.0.0.7:61614", StompEndpoint("10.0.0.7", 61614, True)),
        ("stomp://127.0.0.1:61613", StompEndpoint("127.0.0.1", 61613, False)),
        ("localhost:61613", StompEndpoint("localhost", 61613, False)),
        ("stomp://[::1]:61613", StompEndpoint("::1", 61613, False)),
    ],
)
def test_an_endpoint_gives_its_host_port_and_whether_it_is_tls(uri: str, endpoint: StompEndpoint) -> None:
    assert parse_stomp_uri(uri) == endpoint


@pytest.mark.parametrize(
    "uri",
    [
        "stomp://127.0.0.1:61613\n",  # a regular expression's $ alone lets a final newline through
        "stomp://127.0.0.1:\u0666\u0661\u0666\u0661\u0663",  # Arabic-Indic digits are digits to \d
        "stomp://127.0.0.1:0",
        "stomp://127.0.0.1:65536",
        "stomp://127.0.0.1:61613?x=1",
        "stomp://h\u00f6st:61613",
        "amqp://127.0.0.1:5672",
        "",
    ],
)
def test_anything_else_is_refused_naming_the_endpoint(uri: str) -> None:
    with pytest.raises(ValueError, match="is not a STOMP endpoint"):
        parse_stomp_uri(uri)


def test_the_ipv6_loopback_is_loopback_and_may_be_plain_text() -> None:
    assert StompConnector(["stomp://[::1]:61613"]).endpoints == [StompEndpoint("::1", 61613, False)]
