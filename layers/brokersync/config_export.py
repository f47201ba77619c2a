"""Exporting each broker's current configuration revision, and the topology, to a versioned bucket.

Failover rewrites broker configurations; failback and audits need to know what ran before.
A scheduled export in each region writes the revision every broker of that region is
running, under a key that names the revision, plus a ``current.xml`` that the bucket's
versioning turns into a history, plus the topology as the functions read it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from brokersync.failover.control_plane import BrokerControl
from brokersync.topology import Topology


@dataclass(frozen=True)
class ExportedRevision:
    broker: str
    configuration_id: str
    revision: int
    key: str
    sha256: str


def broker_id_overrides(value: object, topology: Topology) -> dict[str, str] | None:
    """An event's ``brokerIds`` checked: names of the topology's brokers to ids, or nothing.

    Why: the export runs from a schedule, or by hand from the console, where a list or a
    misspelt name would otherwise fail deep inside with a ``TypeError``, or be ignored.
    """
    if value is None or value == {}:
        return None
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise ValueError(f"brokerIds must map broker names to broker ids, not {value!r:.200}")
    unknown = sorted(set(value) - {b.name for b in topology.brokers})
    if unknown:
        raise ValueError(f"brokerIds names brokers the topology does not have: {unknown}")
    return value


def export_configurations(
    mq: Any,
    s3: Any,
    bucket: str,
    topology: Topology,
    topology_text: str,
    *,
    region: str | None = None,
    broker_ids: dict[str, str] | None = None,
) -> list[ExportedRevision]:
    """Write the current revision of every broker in ``region`` (all when None) and the topology.

    ``broker_ids`` maps broker names to ids where they differ from the topology (locally,
    moto's ids). Writing an unchanged revision again only adds an identical version.
    """
    control = BrokerControl.for_topology(mq, topology, broker_ids)
    exported: list[ExportedRevision] = []
    for broker in topology.brokers:
        if region is not None and broker.region not in (None, region):
            continue
        configuration_id, revision, text = control.current_document(broker.name)
        document = text.encode("utf-8")
        digest = hashlib.sha256(document).hexdigest()
        key = f"configurations/{broker.name}/{configuration_id}/revision-{revision:05d}.xml"
        metadata = {"broker": broker.name, "revision": str(revision), "sha256": digest}
        for target in (key, f"configurations/{broker.name}/current.xml"):
            s3.put_object(Bucket=bucket, Key=target, Body=document, ContentType="application/xml", Metadata=metadata)
        exported.append(ExportedRevision(broker.name, configuration_id, revision, key, digest))
    s3.put_object(
        Bucket=bucket, Key="topology/topology.yaml", Body=topology_text.encode(), ContentType="application/yaml"
    )
    return exported
