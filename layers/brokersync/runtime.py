"""Building the clients a function needs, once per cold start, from its environment.

Handlers call these at import time and pass the results into library functions; library
code never creates clients itself. Locally, ``AWS_ENDPOINT_URL`` points every AWS client
(boto3, pynamodb, powertools) at moto.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping

import boto3

from brokersync.broker.statistics import StatisticsClient
from brokersync.broker.stomp import BrokerCredentials, StompConnector
from brokersync.config import (
    DEFAULT_LEDGER_TABLE,
    ENV_BROKER_IDS,
    ENV_CONFIG_BUCKET,
    ENV_EVENT_BUS,
    ENV_LEDGER_TABLE,
    ENV_PURGE_LOOP_ARN,
    ENV_RECEIPTS_FUNCTION,
    ENV_RELAY_RULE,
    ENV_ROLES_PARAMETER,
    setting,
)
from brokersync.failover.control_plane import BrokerControl
from brokersync.failover.steps import FailoverEnvironment, TransitionStore
from brokersync.failover.sync_control import SyncControl, SyncSwitches
from brokersync.ledger import Ledger, dynamodb_ledger
from brokersync.metrics import MetricsSink
from brokersync.purge.remover import SelectorRemover
from brokersync.redaction import install as install_log_redaction
from brokersync.redaction import register_secret
from brokersync.roles import DEFAULT_ROLES_PARAMETER, RoleStore
from brokersync.topology import Broker, Topology

install_log_redaction()  # before the first client exists: botocore and stomp.py log secrets at DEBUG


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
    register_secret(str(value["password"]))
    return BrokerCredentials(str(value["username"]), str(value["password"]))


def broker_connector(broker: Broker) -> StompConnector:
    return StompConnector(broker.stomp, broker_credentials(broker.credentials_secret))


def role_store(env: Mapping[str, str] | None = None) -> RoleStore:
    env = env if env is not None else os.environ
    return RoleStore(boto3.client("ssm"), setting(ENV_ROLES_PARAMETER, default=DEFAULT_ROLES_PARAMETER, env=env))


def sync_control(env: Mapping[str, str] | None = None) -> SyncControl:
    env = env if env is not None else os.environ
    switches = SyncSwitches(
        relay_rule=env.get(ENV_RELAY_RULE) or None,
        receipts_function=env.get(ENV_RECEIPTS_FUNCTION) or None,
        purge_loop_arn=env.get(ENV_PURGE_LOOP_ARN) or None,
    )
    return SyncControl(switches, boto3.client("events"), boto3.client("lambda"), boto3.client("stepfunctions"))


def failover_environment(
    topology: Topology, metrics: MetricsSink, env: Mapping[str, str] | None = None
) -> FailoverEnvironment:
    """Everything the failover steps talk to, from the function's environment."""
    env = env if env is not None else os.environ
    roles = role_store(env)
    return FailoverEnvironment(
        topology=topology,
        roles=roles,
        transitions=TransitionStore(roles.ssm, roles.name),
        brokers=BrokerControl.for_topology(
            boto3.client("mq"),
            topology,
            json.loads(env.get(ENV_BROKER_IDS) or "{}"),
            regional=lambda region: boto3.client("mq", region_name=region),
        ),
        sync=sync_control(env),
        s3=boto3.client("s3"),
        bucket=setting(ENV_CONFIG_BUCKET, env=env),
        events=boto3.client("events"),
        ledger=ledger_from_env(env),
        statistics=lambda broker: StatisticsClient(broker_connector(broker)),
        remover=lambda broker: SelectorRemover(broker_connector(broker)),
        metrics=metrics,
        event_bus=env.get(ENV_EVENT_BUS) or "default",
    )
