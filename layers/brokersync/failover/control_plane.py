"""The Amazon MQ control plane calls a failover makes, each safe to repeat.

A re-run after a partial failure must not pile up revisions or reboot a broker twice, so
every call first looks at where the broker already is: an identical rendered document
reuses the latest revision, a broker already on (or pending) the wanted revision is not
updated again, and only a broker with a pending revision, or one not running the wanted
revision, is rebooted.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ClientError

from brokersync.failover.errors import ConfigurationApplyError, PromoteError
from brokersync.topology import Topology

RUNNING = "RUNNING"


@dataclass(frozen=True)
class AppliedConfiguration:
    broker: str
    configuration_id: str
    revision: int
    #: A new revision was created (False on a re-run that found the same document).
    created: bool
    #: What Amazon MQ reported it sanitized away from the document (it never fails on these).
    warnings: list[dict[str, Any]] = field(default_factory=list)


def broker_id(broker_id_or_arn: str) -> str:
    """Amazon MQ API calls take the id; the topology may hold the ARN."""
    return broker_id_or_arn.rsplit(":", 1)[-1]


class BrokerControl:
    """The Amazon MQ API, addressed by the topology's broker names.

    The two brokers live in different regions and Amazon MQ answers for a broker only in its
    own region, so each broker may have its own client (``clients``); ``mq`` serves the rest.
    """

    def __init__(self, mq: Any, broker_ids: dict[str, str], clients: dict[str, Any] | None = None) -> None:
        self.mq = mq
        self.broker_ids = broker_ids
        self.clients = clients or {}

    @classmethod
    def for_topology(
        cls,
        mq: Any,
        topology: Topology,
        overrides: dict[str, str] | None = None,
        regional: Callable[[str], Any] | None = None,
    ) -> BrokerControl:
        """Ids from the topology, except where ``overrides`` names a broker (locally, moto's ids).

        ``regional(region)`` builds the client for a broker whose topology entry names a region.
        """
        clients = {b.name: regional(b.region) for b in topology.brokers if regional and b.region}
        return cls(mq, {b.name: b.broker_id for b in topology.brokers} | (overrides or {}), clients)

    def _id(self, name: str) -> str:
        return broker_id(self.broker_ids[name])

    def _mq(self, name: str) -> Any:
        return self.clients.get(name, self.mq)

    def describe(self, name: str) -> dict[str, Any]:
        return self._mq(name).describe_broker(BrokerId=self._id(name))

    def current_document(self, name: str) -> tuple[str, int, str]:
        """The configuration id, revision and document the broker runs now."""
        current = self.describe(name)["Configurations"]["Current"]
        revision = self._mq(name).describe_configuration_revision(
            ConfigurationId=current["Id"], ConfigurationRevision=str(current["Revision"])
        )
        return current["Id"], int(current["Revision"]), base64.b64decode(revision["Data"]).decode("utf-8")

    def apply(self, name: str, document: str, description: str) -> AppliedConfiguration:
        """Make ``document`` the broker's next revision (pending until a reboot)."""
        configurations = self.describe(name)["Configurations"]
        configuration_id = configurations["Current"]["Id"]
        mq = self._mq(name)
        latest = int(mq.describe_configuration(ConfigurationId=configuration_id)["LatestRevision"]["Revision"])
        latest_data = mq.describe_configuration_revision(
            ConfigurationId=configuration_id, ConfigurationRevision=str(latest)
        )["Data"]
        warnings: list[dict[str, Any]] = []
        created = base64.b64decode(latest_data).decode("utf-8") != document
        try:
            if created:
                response = mq.update_configuration(
                    ConfigurationId=configuration_id,
                    Data=base64.b64encode(document.encode("utf-8")).decode("ascii"),
                    Description=description[:100],
                )
                latest = int(response["LatestRevision"]["Revision"])
                warnings = list(response.get("Warnings", []))
            wanted = {"Id": configuration_id, "Revision": latest}
            on_it = [configurations.get(k) or {} for k in ("Current", "Pending")]
            if not any(c.get("Id") == configuration_id and int(c.get("Revision", -1)) == latest for c in on_it):
                mq.update_broker(BrokerId=self._id(name), Configuration=wanted)
        except ClientError as e:
            raise ConfigurationApplyError(f"{name}: {e.response['Error'].get('Message', e)}") from e
        return AppliedConfiguration(name, configuration_id, latest, created, warnings)

    def needs_reboot(self, name: str, revision: int) -> bool:
        configurations = self.describe(name)["Configurations"]
        if configurations.get("Pending"):
            return True
        return int(configurations["Current"]["Revision"]) != revision

    def reboot(self, name: str) -> None:
        self._mq(name).reboot_broker(BrokerId=self._id(name))

    def state(self, name: str) -> str:
        return str(self.describe(name)["BrokerState"])

    def promote(self, name: str, mode: str) -> None:
        """CRDR: make the replica broker the primary (Amazon MQ's own data replication)."""
        try:
            self._mq(name).promote(BrokerId=self._id(name), Mode=mode)
        except ClientError as e:
            raise PromoteError(f"{name}: {e.response['Error'].get('Message', e)}") from e
