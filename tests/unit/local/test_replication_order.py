"""The replication stand-in keeps each item's changes in order and no order across items, as AWS does."""

from __future__ import annotations

from typing import Any

import pytest

from brokersync_local.replication import Change, GlobalTableReplication, RegionEndpoint
from tests.fake_clock import FakeClock


class Region:
    """A region's table and stream; ``landed`` lists the item keys in the order writes arrived."""

    def __init__(self, name: str, clock: FakeClock) -> None:
        self.name = name
        self.clock = clock
        self.stream: list[dict[str, Any]] = []
        self.landed: list[tuple[str, str]] = []
        self.reachable = True

    def write(self, pk: str, version: str) -> None:
        self.stream.append(
            {
                "eventName": "MODIFY",
                "dynamodb": {
                    "Keys": {"pk": {"S": pk}, "sk": {"S": "current"}},
                    "NewImage": {"pk": {"S": pk}, "sk": {"S": "current"}, "v": {"S": version}},
                    "ApproximateCreationDateTime": self.clock(),
                },
            }
        )

    def read(self) -> list[dict[str, Any]]:
        records, self.stream = self.stream, []
        return records

    def apply(self, change: Change) -> None:
        assert change.image is not None
        self.landed.append((change.image["pk"]["S"], change.image["v"]["S"]))


def _pair(jitter: float, seed: int) -> tuple[GlobalTableReplication, Region, Region, FakeClock]:
    clock = FakeClock()
    replication = GlobalTableReplication(
        "ledger",
        [RegionEndpoint("us-east-1", "http://e"), RegionEndpoint("us-west-2", "http://w")],
        clock=clock,
        jitter=jitter,
        seed=seed,
    )
    east, west = Region("us-east-1", clock), Region("us-west-2", clock)
    replication.regions = {"us-east-1": east, "us-west-2": west}  # type: ignore[dict-item]
    return replication, east, west, clock


def _run(replication: GlobalTableReplication, clock: FakeClock, seconds: float) -> None:
    for _ in range(int(seconds / 0.05)):
        clock.now += 0.05
        replication.step()


def _capture_then_pointer(jitter: float, seed: int) -> list[str]:
    """The relay's write order: the capture item, then 5 ms later the pointer naming it."""
    replication, east, west, clock = _pair(jitter, seed)
    east.write("C#ORDERS#0", "1")
    clock.now += 0.005
    east.write("Q#ORDERS", "1")
    replication.step()
    _run(replication, clock, 3)
    return [pk for pk, _ in west.landed]


def test_two_items_written_a_moment_apart_arrive_in_either_order() -> None:
    orders = {tuple(_capture_then_pointer(0.15, seed)) for seed in range(40)}

    assert orders == {("C#ORDERS#0", "Q#ORDERS"), ("Q#ORDERS", "C#ORDERS#0")}


def test_without_jitter_items_arrive_in_the_order_they_were_written() -> None:
    assert {tuple(_capture_then_pointer(0.0, seed)) for seed in range(10)} == {("C#ORDERS#0", "Q#ORDERS")}


def test_one_items_changes_never_overtake_each_other() -> None:
    replication, east, west, clock = _pair(0.5, seed=7)
    for version in range(50):
        east.write("C#ORDERS#0", f"{version:02d}")
        clock.now += 0.002
        replication.step()
    _run(replication, clock, 3)

    assert [v for _, v in west.landed] == [f"{v:02d}" for v in range(50)]


def test_a_change_lands_within_the_jitter_of_the_lag() -> None:
    replication, east, west, clock = _pair(0.15, seed=3)
    east.write("C#ORDERS#0", "1")
    replication.step()
    _run(replication, clock, 0.8)
    assert west.landed == []
    _run(replication, clock, 0.4)
    assert west.landed == [("C#ORDERS#0", "1")]


def test_a_jitter_of_the_whole_lag_or_more_is_refused() -> None:
    with pytest.raises(ValueError, match="jitter"):
        GlobalTableReplication(
            "ledger", [RegionEndpoint("us-east-1", "http://e"), RegionEndpoint("us-west-2", "http://w")], jitter=1.0
        )
