"""Building the clients a function needs, once per cold start, from its environment.

Handlers call these at import time and pass the results into library functions; library
code never creates clients itself. Locally, ``AWS_ENDPOINT_URL`` points every AWS client
(boto3, pynamodb, powertools) at moto.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from typing import Any

import boto3
from botocore.config import Config

from brokersync.broker.statistics import StatisticsClient
from brokersync.broker.stomp import BrokerCredentials, StompConnector
from brokersync.config import (
    DEFAULT_LEDGER_TABLE,
    ENV_BROKER_IDS,
    ENV_CONFIG_BUCKET,
    ENV_EVENT_BUS,
    ENV_LEDGER_TABLE,
    ENV_PEER_REGION,
    ENV_PURGE_LOOP_ARN,
    ENV_RECEIPTS_FUNCTION,
    ENV_RELAY_RULE,
    ENV_ROLE_REGION,
    EVERY_REGION,
    setting,
)
from brokersync.failover.control_plane import BrokerControl
from brokersync.failover.steps import FailoverEnvironment, TransitionStore
from brokersync.failover.sync_control import SyncControl, SyncSwitches
from brokersync.ledger import Ledger, dynamodb_ledger, peer_replicas
from brokersync.ledger.control import ControlRecords, control_model
from brokersync.metrics import MetricsSink
from brokersync.purge.remover import SelectorRemover
from brokersync.redaction import install as install_log_redaction
from brokersync.redaction import register_secret
from brokersync.roles import RoleStore
from brokersync.topology import Broker, Topology

#: Calls into the other region fail fast: during a failover that region may be the one lost,
#: and every second spent waiting on it is RTO. Two attempts, each timing out on connect (2 s)
#: or on read (3 s), bound one call at about 7 s with the backoff; 5 s + 10 s made StartSync
#: wait 30 s on a lost region's purge loop (region drill). ``total_max_attempts`` counts
#: attempts; botocore's ``max_attempts`` would count retries, three attempts for a 2.
PEER_REGION_CLIENT = Config(connect_timeout=2, read_timeout=3, retries={"total_max_attempts": 2, "mode": "standard"})

install_log_redaction()  # before the first client exists: botocore and stomp.py log secrets at DEBUG


def _table_location(env: Mapping[str, str]) -> tuple[str, str | None, str | None]:
    return (
        setting(ENV_LEDGER_TABLE, default=DEFAULT_LEDGER_TABLE, env=env),
        region_from_env(env),
        env.get("AWS_ENDPOINT_URL_DYNAMODB") or env.get("AWS_ENDPOINT_URL") or None,
    )


def region_from_env(env: Mapping[str, str] | None = None) -> str | None:
    env = env if env is not None else os.environ
    return env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or None


def role_region_from_env(env: Mapping[str, str] | None = None) -> str | None:
    """The region whose roles the functions play; None plays every role (``*``)."""
    env = env if env is not None else os.environ
    value = env.get(ENV_ROLE_REGION) or region_from_env(env)
    return None if value == EVERY_REGION else value


def ledger_from_env(env: Mapping[str, str] | None = None) -> Ledger:
    table, region, host = _table_location(env if env is not None else os.environ)
    return dynamodb_ledger(table, region=region, host=host)


def ledger_replicas(env: Mapping[str, str] | None = None) -> Callable[[str], Ledger | None]:
    """The ledger in another region's replica, read with a peer's short timeouts; None for this region's own.

    A switchover's drain reads where the old primary's relay wrote (``drain_figures``). One
    stack playing every role (``*``) has one replica for both.
    """
    env = env if env is not None else os.environ
    table, own, host = _table_location(env)
    return peer_replicas(table, None if role_region_from_env(env) is None else own, host)


def control_records(env: Mapping[str, str] | None = None) -> ControlRecords:
    """The role and transition records, in this region's replica of the ledger table."""
    table, region, host = _table_location(env if env is not None else os.environ)
    return ControlRecords(control_model(table, region, host))


def broker_credentials(secret_name: str) -> BrokerCredentials:
    """The broker user from its Secrets Manager secret (``{"username": ..., "password": ...}``)."""
    from aws_lambda_powertools.utilities import parameters  # noqa: PLC0415 (AWS-only path)

    value = parameters.get_secret(secret_name, transform="json", max_age=300)
    register_secret(str(value["password"]))
    return BrokerCredentials(str(value["username"]), str(value["password"]))


def broker_connector(broker: Broker) -> StompConnector:
    return StompConnector(broker.stomp, broker_credentials(broker.credentials_secret))


def role_store(env: Mapping[str, str] | None = None) -> RoleStore:
    """The role record read in this region's replica and in the peer region's (the higher epoch wins)."""
    env = env if env is not None else os.environ
    table, region, host = _table_location(env)
    peer = env.get(ENV_PEER_REGION) or ""
    peers = (
        []
        if not peer or peer in (region, EVERY_REGION)
        else [ControlRecords(control_model(table, peer, host, peer=True))]
    )
    return RoleStore(control_records(env), peers)


def sync_control(env: Mapping[str, str] | None = None) -> SyncControl:
    env = env if env is not None else os.environ
    switches = SyncSwitches(
        relay_rule=env.get(ENV_RELAY_RULE) or None,
        receipts_function=env.get(ENV_RECEIPTS_FUNCTION) or None,
        purge_loop_arn=env.get(ENV_PURGE_LOOP_ARN) or None,
    )
    return SyncControl(
        switches,
        boto3.client("events"),
        boto3.client("lambda"),
        boto3.client("stepfunctions"),
        # Where one stack stands in for both regions (role region "*"), its own loop is the DR's.
        regional_sfn=None if role_region_from_env(env) is None else _peer_stepfunctions,
    )


def _peer_stepfunctions(region: str) -> Any:
    return boto3.client("stepfunctions", region_name=region, config=PEER_REGION_CLIENT)


def broker_control(topology: Topology, env: Mapping[str, str] | None = None) -> BrokerControl:
    """The Amazon MQ API for the topology's brokers, each through a client of its own region."""
    env = env if env is not None else os.environ
    return BrokerControl.for_topology(
        boto3.client("mq"),
        topology,
        json.loads(env.get(ENV_BROKER_IDS) or "{}"),
        regional=lambda region: boto3.client("mq", region_name=region),
    )


def failover_environment(
    topology: Topology, metrics: MetricsSink, env: Mapping[str, str] | None = None
) -> FailoverEnvironment:
    """Everything the failover steps talk to, from the function's environment."""
    env = env if env is not None else os.environ
    records = control_records(env)
    return FailoverEnvironment(
        topology=topology,
        roles=role_store(env),
        transitions=TransitionStore(records),
        brokers=broker_control(topology, env),
        sync=sync_control(env),
        s3=boto3.client("s3"),
        bucket=setting(ENV_CONFIG_BUCKET, env=env),
        events=boto3.client("events"),
        ledger=ledger_from_env(env),
        statistics=lambda broker: StatisticsClient(broker_connector(broker)),
        remover=lambda broker: SelectorRemover(broker_connector(broker)),
        metrics=metrics,
        event_bus=env.get(ENV_EVENT_BUS) or "default",
        ledger_in=ledger_replicas(env),
    )
