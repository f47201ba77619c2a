"""A function reads another region's replica of the ledger only where that region is not its own."""

from __future__ import annotations

from pathlib import Path

import boto3
import pytest
from moto import mock_aws
from ulid import ULID

from brokersync.config import ENV_LEDGER_TABLE, ENV_ROLE_REGION, EVERY_REGION
from brokersync.ledger import dynamodb_ledger, peer_replicas
from brokersync.ledger.schema import create_ledger_table
from brokersync.runtime import ledger_replicas

TABLE = "brokersync-replicas-test"
IN_WEST = {"AWS_REGION": "us-west-2", ENV_LEDGER_TABLE: TABLE}


def test_another_regions_replica_is_read_in_that_region(project_root: Path) -> None:
    with mock_aws():
        for region in ("us-east-1", "us-west-2"):
            create_ledger_table(boto3.client("dynamodb", region_name=region), TABLE, project_root / "template.yaml")
        dynamodb_ledger(TABLE, region="us-east-1").record("ORDERS", [(str(ULID()), 1_795_340_000_000)])

        east = ledger_replicas(IN_WEST)("us-east-1")

        assert east is not None and len(east.pending("ORDERS", read_only=True)) == 1
        assert dynamodb_ledger(TABLE, region="us-west-2").pending("ORDERS") == []


def test_the_functions_own_region_is_not_a_replica_to_read_again() -> None:
    assert ledger_replicas(IN_WEST)("us-west-2") is None


@pytest.mark.parametrize("region", ["us-east-1", "us-west-2"])
def test_one_stack_playing_every_role_has_one_replica_for_both(region: str) -> None:
    assert ledger_replicas(IN_WEST | {ENV_ROLE_REGION: EVERY_REGION})(region) is None


def test_the_chooser_the_cli_calls_reads_only_another_regions_replica() -> None:
    choose = peer_replicas(TABLE, "us-west-2")

    assert choose("us-west-2") is None
    assert choose("us-east-1") is not None


def test_each_regions_replica_is_opened_once() -> None:
    choose = peer_replicas(TABLE, "us-west-2")

    assert choose("us-east-1") is choose("us-east-1")
