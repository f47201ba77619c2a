"""Environment names and how each setting resolves: explicit argument → environment → default.

Every environment variable the functions read is named here and nowhere else, so the
template, the local world and the tests agree on one list.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from brokersync.topology import Topology, load_topology, parse_topology_text

ENV_TOPOLOGY_FILE = "BROKERSYNC_TOPOLOGY_FILE"
ENV_TOPOLOGY_PARAMETER = "BROKERSYNC_TOPOLOGY_PARAMETER"
ENV_LEDGER_TABLE = "BROKERSYNC_LEDGER_TABLE"
ENV_RELAY_MAX_SECONDS = "BROKERSYNC_RELAY_MAX_SECONDS"
#: Seconds (by consume time) before a pending key may be given up on as missing, and then only
#: once the copy path shows its copy can no longer arrive (purge.service.PurgeSettings).
ENV_PURGE_MISSING_AFTER_S = "BROKERSYNC_PURGE_MISSING_AFTER_S"
#: The region whose roles this stack's functions play (the template sets it to the stack's
#: region); ``*`` plays every role, for a world where one stack stands in for both regions.
ENV_ROLE_REGION = "BROKERSYNC_ROLE_REGION"
EVERY_REGION = "*"
#: The pair's other region (the template's PeerRegion). The role record is also read from its
#: replica, and the higher epoch wins, so a region returning from a partition does not act on
#: its stale replica while replication catches up.
ENV_PEER_REGION = "BROKERSYNC_PEER_REGION"
ENV_CONFIG_BUCKET = "BROKERSYNC_CONFIG_BUCKET"
#: JSON object of broker name -> Amazon MQ broker id, where ids differ from the topology (locally).
ENV_BROKER_IDS = "BROKERSYNC_BROKER_IDS"
ENV_RELAY_RULE = "BROKERSYNC_RELAY_RULE"
ENV_RECEIPTS_FUNCTION = "BROKERSYNC_RECEIPTS_FUNCTION"
ENV_PURGE_LOOP_ARN = "BROKERSYNC_PURGE_LOOP_ARN"
ENV_EVENT_BUS = "BROKERSYNC_EVENT_BUS"
#: The failback state machine the health probe starts when it finds a stale primary (empty: off).
ENV_AUTO_FAILBACK_ARN = "BROKERSYNC_AUTO_FAILBACK_ARN"

DEFAULT_TOPOLOGY_PARAMETER = "/brokersync/topology"
DEFAULT_LEDGER_TABLE = "brokersync-ledger"
#: The relay function's schedule (``rate(1 minute)`` in template.yaml): one invocation a period.
RELAY_SCHEDULE_PERIOD_S = 60.0
#: How long one relay invocation relays before it waits for the next one: the schedule's period
#: less the wrap-up (the last batch, the capture audit). The function's timeout (90 s) is well
#: above it, so a slow wrap-up is not killed mid-batch.
DEFAULT_RELAY_MAX_SECONDS = 58.0
#: After its time an invocation goes on relaying until the next minute's invocation consumes too,
#: for at most this long (and never into the last ``RELAY_WRAP_UP_S`` of its timeout): so no
#: advisory waits between two invocations, however late within this EventBridge delivers the
#: next minute's event. The function's reserved concurrency is 2 for it (decision 0039). 0: off.
ENV_RELAY_HAND_OVER_S = "BROKERSYNC_RELAY_HAND_OVER_S"
DEFAULT_RELAY_HAND_OVER_S = 20.0
#: Time a relay invocation keeps after relaying, for its last batch and the capture audit.
RELAY_WRAP_UP_S = 10.0
#: Seconds a scheduled relay invocation runs on average: its time, and about 3 s waiting for the
#: next one to subscribe (the event comes at the minute, the subscription within a second or two,
#: and the broker's consumer count is read once a second). What ``brokersync cost`` bills.
RELAY_BILLED_SECONDS = DEFAULT_RELAY_MAX_SECONDS + 3.0
#: How long one purge invocation purges before the loop's next iteration.
ENV_PURGE_MAX_SECONDS = "BROKERSYNC_PURGE_MAX_SECONDS"
DEFAULT_PURGE_MAX_SECONDS = 40.0


def setting(
    name: str, explicit: str | None = None, default: str | None = None, env: Mapping[str, str] | None = None
) -> str:
    """Resolve one setting; raise ``KeyError`` naming the variable when it has no value at all."""
    if explicit:
        return explicit
    value = (env if env is not None else os.environ).get(name) or default
    if value is None:
        raise KeyError(f"{name} is not set")
    return value


def seconds_setting(name: str, env: Mapping[str, str] | None = None) -> float | None:
    """A duration in seconds from the environment (None when unset); a bad value names its variable."""
    text = (env if env is not None else os.environ).get(name, "").strip()
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{name}={text!r} is not a number of seconds") from None
    if not value > 0 or value == float("inf"):
        raise ValueError(f"{name}={text!r} must be a positive, finite number of seconds")
    return value


def runtime_topology(env: Mapping[str, str] | None = None) -> Topology:
    """The topology a function runs with: a bundled file locally, the SSM parameter in AWS.

    Imported lazily, powertools' parameter provider caches the value per cold start, so a
    topology change reaches running functions within the cache age without a redeploy.
    """
    env = env if env is not None else os.environ
    if path := env.get(ENV_TOPOLOGY_FILE):
        return load_topology(path)
    from aws_lambda_powertools.utilities import parameters  # noqa: PLC0415 (not needed locally)

    name = setting(ENV_TOPOLOGY_PARAMETER, default=DEFAULT_TOPOLOGY_PARAMETER, env=env)
    text = parameters.get_parameter(name, max_age=300)
    return parse_topology_text(str(text), source=f"ssm:{name}")
