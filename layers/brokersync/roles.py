"""Which broker plays primary right now: the role parameter, and the topology seen through it.

The topology file says which broker was primary when the pair was set up; a failover must
not rewrite it (it is the customer's file, and the old primary's region may be gone). The
current assignment lives in one SSM parameter per region, written by the failover and
failback state machines. Everything that acts on "the primary" or "the DR broker" (the
relay, the purge, the failover steps) reads the assignment first, so sync follows the roles
and not the region a function happens to run in.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

from brokersync.exceptions import BrokerSyncError
from brokersync.topology import Topology

DEFAULT_ROLES_PARAMETER = "/brokersync/roles"
#: The value the stack seeds the role parameter with: no failover has happened yet, roles are
#: as topology.yaml says. It is a constant so that CloudFormation never rewrites the parameter
#: on a stack update (it only updates resources whose properties changed).
AS_IN_TOPOLOGY = "as-in-topology"


class RoleAssignmentError(BrokerSyncError):
    """The role parameter names brokers the topology does not have, or is not JSON."""


@dataclass(frozen=True)
class RoleAssignment:
    primary: str
    dr: str
    #: Increases by one with every change of roles, so two regions can tell which is newer.
    epoch: int = 0
    changed_at: str = ""
    reason: str = ""

    @classmethod
    def initial(cls, topology: Topology) -> RoleAssignment:
        return cls(primary=topology.primary.name, dr=topology.dr.name)

    def swapped(self, reason: str, now: datetime | None = None) -> RoleAssignment:
        moment = (now or datetime.now(UTC)).isoformat(timespec="milliseconds")
        return RoleAssignment(self.dr, self.primary, self.epoch + 1, moment, reason)

    def changed_at_ms(self) -> int | None:
        if not self.changed_at:
            return None
        return int(datetime.fromisoformat(self.changed_at).timestamp() * 1000)

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> RoleAssignment:
        try:
            data = json.loads(text)
            return cls(
                primary=str(data["primary"]),
                dr=str(data["dr"]),
                epoch=int(data.get("epoch", 0)),
                changed_at=str(data.get("changed_at", "")),
                reason=str(data.get("reason", "")),
            )
        except (ValueError, KeyError, TypeError) as e:
            raise RoleAssignmentError(f"role parameter is not a role assignment: {e}") from e


def apply_roles(topology: Topology, assignment: RoleAssignment | None) -> Topology:
    """The topology with roles as ``assignment`` says (as written when there is none)."""
    if assignment is None or assignment.primary == topology.primary.name:
        return topology
    names = {b.name for b in topology.brokers}
    if {assignment.primary, assignment.dr} != names:
        raise RoleAssignmentError(
            f"role parameter names {assignment.primary!r}/{assignment.dr!r}, topology has {sorted(names)}"
        )
    return topology.swapped()


class SsmParameter:
    """One String parameter in SSM; one that does not exist reads as None, not as an error."""

    def __init__(self, ssm: Any, name: str) -> None:
        self.ssm = ssm
        self.name = name

    def get(self) -> str | None:
        try:
            return str(self.ssm.get_parameter(Name=self.name)["Parameter"]["Value"])
        except self.ssm.exceptions.ParameterNotFound:
            return None

    def put(self, value: str) -> None:
        self.ssm.put_parameter(Name=self.name, Value=value, Type="String", Overwrite=True)


class RoleStore(SsmParameter):
    """The role parameter in SSM (one per region; the failover writes the region it runs in)."""

    def __init__(self, ssm: Any, name: str = DEFAULT_ROLES_PARAMETER) -> None:
        super().__init__(ssm, name)

    def read(self) -> RoleAssignment | None:
        value = self.get()
        if value is None or value.strip() == AS_IN_TOPOLOGY:
            return None
        return RoleAssignment.from_json(value)

    def write(self, assignment: RoleAssignment) -> None:
        self.put(assignment.to_json())

    def current(self, topology: Topology) -> Topology:
        return apply_roles(topology, self.read())
