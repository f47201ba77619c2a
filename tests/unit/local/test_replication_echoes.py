"""The replication stand-in knows its own writes in a region's stream, even one whose call timed out."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ReadTimeoutError

from brokersync_local.replication import Change, GlobalTableReplication, RegionEndpoint
from tests.fake_clock import FakeClock

KEY = {"pk": {"S": "C#ORDERS#0"}, "sk": {"N": "1000"}}


class PausedRegion:
    """A region's table and stream. ``pause_next`` freezes it mid-request (SIGSTOP): every write
    sent while it is frozen times out for the caller and lands when it resumes (SIGCONT)."""

    def __init__(self, name: str, clock: FakeClock) -> None:
        self.name = name
        self.clock = clock
        self.items: dict[str, dict[str, Any]] = {}
        self.stream: list[dict[str, Any]] = []
        self.reachable = True
        self.paused = False
        self.pause_next = False
        self._landing_on_resume: list[dict[str, Any]] = []

    def write(self, image: dict[str, Any]) -> None:
        self.items[KEY["pk"]["S"]] = image
        self.stream.append(
            {
                "eventName": "MODIFY",
                "dynamodb": {"Keys": KEY, "NewImage": image, "ApproximateCreationDateTime": self.clock()},
            }
        )

    def resume(self) -> None:
        self.paused = False
        for image in self._landing_on_resume:
            self.write(image)
        self._landing_on_resume.clear()

    def read(self) -> list[dict[str, Any]]:
        if self.paused:
            raise ReadTimeoutError(endpoint_url=f"http://{self.name}")
        records, self.stream = self.stream, []
        return records

    def apply(self, change: Change) -> None:
        assert change.image is not None
        if self.paused:  # the request waits in the frozen process's socket: it lands on resume
            self._landing_on_resume.append(change.image)
            raise ReadTimeoutError(endpoint_url=f"http://{self.name}")
        if self.pause_next:
            self.pause_next, self.paused = False, True
            self._landing_on_resume.append(change.image)
            raise ReadTimeoutError(endpoint_url=f"http://{self.name}")
        self.write(change.image)


def _item(*keys: str) -> dict[str, Any]:
    return {**KEY, "keys": {"SS": sorted(keys)}}


def _two_regions(
    clock: FakeClock, west_kind: type[PausedRegion] = PausedRegion
) -> tuple[GlobalTableReplication, PausedRegion, Any]:
    """Replication between two stand-in regions (east, then west as ``west_kind``)."""
    replication = GlobalTableReplication(
        "ledger", [RegionEndpoint("us-east-1", "http://e"), RegionEndpoint("us-west-2", "http://w")], clock=clock
    )
    east, west = PausedRegion("us-east-1", clock), west_kind("us-west-2", clock)
    replication.regions = {"us-east-1": east, "us-west-2": west}  # type: ignore[dict-item]
    return replication, east, west


def test_a_write_that_timed_out_and_landed_later_is_not_bounced_back_over_newer_versions() -> None:
    clock = FakeClock()
    replication, east, west = _two_regions(clock)

    east.write(_item("a"))  # the relay's first write of a capture item
    replication.step()
    clock.now += 1.1
    west.pause_next = True  # the region is paused while the copy of that write is on its way
    replication.step()
    clock.now += 0.4
    east.write(_item("a", "b"))  # the relay adds a key to the same item
    for _ in range(3):  # the region stays away; then it resumes and the first copy lands, late
        clock.now += 1.0
        replication.step()
    west.resume()
    for _ in range(5):
        clock.now += 1.0
        replication.step()

    assert east.items["C#ORDERS#0"]["keys"] == {"SS": ["a", "b"]}
    assert west.items["C#ORDERS#0"]["keys"] == {"SS": ["a", "b"]}


class CountingRegion(PausedRegion):
    """A paused region that counts the calls made to it: each one is a timeout to wait out."""

    def __init__(self, name: str, clock: FakeClock) -> None:
        super().__init__(name, clock)
        self.calls = 0

    def read(self) -> list[dict[str, Any]]:
        self.calls += 1
        return super().read()

    def apply(self, change: Change) -> None:
        self.calls += 1
        super().apply(change)


def test_a_region_whose_stream_does_not_answer_costs_a_step_one_timeout_and_its_changes_wait() -> None:
    clock = FakeClock()
    replication, east, west = _two_regions(clock, CountingRegion)
    west.paused = True

    east.write(_item("a"))
    for _ in range(3):
        clock.now += 2.0
        replication.step()

    assert west.calls == 3  # one stream read per step; no write sent to a region that did not answer
    assert replication.backlog() == {"us-east-1": 0, "us-west-2": 1}
    west.resume()
    clock.now += 0.1
    replication.step()
    assert west.items["C#ORDERS#0"]["keys"] == {"SS": ["a"]}
    assert replication.backlog()["us-west-2"] == 0
