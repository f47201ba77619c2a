"""The replication stand-in knows its own writes in a region's stream, even one whose call timed out."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ReadTimeoutError

from brokersync_local.replication import Change, GlobalTableReplication, RegionEndpoint

KEY = {"pk": {"S": "C#ORDERS#0"}, "sk": {"N": "1000"}}


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class PausedRegion:
    """A region's table and stream. ``pause_next`` freezes it mid-request (SIGSTOP): every write
    sent while it is frozen times out for the caller and lands when it resumes (SIGCONT)."""

    def __init__(self, name: str, clock: Clock) -> None:
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


def test_a_write_that_timed_out_and_landed_later_is_not_bounced_back_over_newer_versions() -> None:
    clock = Clock()
    replication = GlobalTableReplication(
        "ledger", [RegionEndpoint("us-east-1", "http://e"), RegionEndpoint("us-west-2", "http://w")], clock=clock
    )
    east, west = PausedRegion("us-east-1", clock), PausedRegion("us-west-2", clock)
    replication.regions = {"us-east-1": east, "us-west-2": west}  # type: ignore[dict-item]

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
