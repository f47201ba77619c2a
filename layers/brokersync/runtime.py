"""Building the clients a function needs, once per cold start, from its environment.

Handlers call these at import time and pass the results into library functions; library
code never creates clients itself. Locally, ``AWS_ENDPOINT_URL`` points every AWS client
(boto3, pynamodb, powertools) at moto.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from brokersync.broker.stomp import BrokerCredentials, StompConnector
from brokersync.config import DEFAULT_LEDGER_TABLE, ENV_LEDGER_TABLE, setting
from brokersync.ledger import Ledger, dynamodb_ledger
from brokersync.topology import Role, Topology


def ledger_from_env(env: Mapping[str, str] | None = None) -> Ledger:
    env = env if env is not None else os.environ
    return dynamodb_ledger(
        setting(ENV_LEDGER_TABLE, default=DEFAULT_LEDGER_TABLE, env=env),
        region=env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION"),
        host=env.get("AWS_ENDPOINT_URL_DYNAMODB") or env.get("AWS_ENDPOINT_URL"),
    )


def broker_credentials(secret_name: str) -> BrokerCredentials:
    """The broker user from its Secrets Manager secret (``{"username": ..., "password": ...}``)."""
    from aws_lambda_powertools.utilities import parameters  # noqa: PLC0415 (AWS-only path)

    value = parameters.get_secret(secret_name, transform="json", max_age=300)
    return BrokerCredentials(str(value["username"]), str(value["password"]))


def stomp_connector(topology: Topology, role: Role) -> StompConnector:
    broker = topology.broker(role)
    return StompConnector(broker.stomp, broker_credentials(broker.credentials_secret))
