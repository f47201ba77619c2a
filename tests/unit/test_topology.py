"""The topology file: what it accepts, and that every invalid input names its field."""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from brokersync.exceptions import TopologyError
from brokersync.topology import MAX_QUEUE_NAME_LENGTH, Topology, load_topology, parse_topology


@pytest.fixture
def raw(topology_path: Path) -> dict[str, Any]:
    return yaml.safe_load(topology_path.read_text())


def _error_for(raw: dict[str, Any]) -> TopologyError:
    with pytest.raises(TopologyError) as info:
        parse_topology(raw)
    return info.value


def test_the_shipped_example_is_valid(topology_path: Path) -> None:
    topology = load_topology(topology_path)

    assert topology.primary.name == "orders-use1"
    assert topology.dr.name == "orders-usw2"
    assert [q.name for q in topology.queues] == ["ORDERS", "PAYMENTS", "AUDIT"]


def test_defaults_fill_what_a_minimal_file_leaves_out(raw: dict[str, Any]) -> None:
    minimal = {"brokers": raw["brokers"], "queues": [{"name": "ORDERS"}]}

    topology = parse_topology(minimal)

    assert topology.dr_suffix == ".DR"
    assert topology.queues[0].mode == "sync"
    assert topology.queues[0].sync_key == "correlation-id"
    assert topology.tuning.dr.max_page_size == 200_000
    assert topology.tuning.queues_at_once == 8


def test_mirror_queues_do_not_capture_consumed_messages(topology_path: Path) -> None:
    topology = load_topology(topology_path)

    assert topology.queue("ORDERS").captures_consumed
    assert not topology.queue("AUDIT").captures_consumed


def test_the_captured_queues_are_the_sync_and_active_active_ones_in_file_order(topology_path: Path) -> None:
    shipped = load_topology(topology_path)
    both_ways = load_topology(topology_path.parent / "examples" / "active-active.yaml")

    assert [q.name for q in shipped.captured_queues] == ["ORDERS", "PAYMENTS"]
    assert [q.mode for q in both_ways.captured_queues] == [
        q.mode for q in both_ways.queues if q.mode in ("sync", "active-active")
    ]
    assert "active-active" in {q.mode for q in both_ways.captured_queues}


def test_dr_name_appends_the_suffix(topology_path: Path) -> None:
    assert load_topology(topology_path).dr_name("ORDERS") == "ORDERS.DR"


def test_swapped_exchanges_the_roles_and_nothing_else(topology_path: Path) -> None:
    topology = load_topology(topology_path)

    swapped = topology.swapped()

    assert swapped.primary.name == topology.dr.name
    assert swapped.dr.name == topology.primary.name
    assert swapped.queues == topology.queues
    assert swapped.swapped() == topology


def test_with_endpoints_points_a_broker_elsewhere(topology_path: Path) -> None:
    topology = load_topology(topology_path)

    local = topology.with_endpoints({"orders-usw2": (["tcp://127.0.0.1:62616"], ["stomp://127.0.0.1:62613"])})

    assert local.dr.openwire == ["tcp://127.0.0.1:62616"]
    assert not local.dr.uses_tls
    assert local.primary.openwire == topology.primary.openwire


def test_a_broker_arn_or_id_is_accepted(raw: dict[str, Any]) -> None:
    raw["brokers"][0]["broker_id"] = "b-1a2b3c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d"

    assert isinstance(parse_topology(raw), Topology)


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda r: r["queues"][1].update(sync_key="header"), "queues[1].sync_key"),
        (lambda r: r["queues"][0].update(mode="copy"), "queues[0].mode"),
        (lambda r: r["queues"][0].update(name="ORDERS.>"), "queues[0].name"),
        (lambda r: r["queues"][0].update(name="A,B"), "queues[0].name"),
        (lambda r: r["queues"][0].update(name="BROKERSYNC.CONSUMED"), "queues[0].name"),
        (lambda r: r["queues"][0].update(name="Q" * (MAX_QUEUE_NAME_LENGTH + 1)), "queues[0].name"),
        (lambda r: r["queues"][0].update(name="ORDERS.DR"), "queues"),
        # Python's ``$`` matches before a final newline; a name must be refused whole.
        (lambda r: r["queues"][0].update(name="ORDERS\n"), "queues[0].name"),
        (lambda r: r["queues"][0].update(name="ORDERS\u00e9"), "queues[0].name"),
        (lambda r: r["queues"].append({"name": "ORDERS"}), "queues"),
        (lambda r: r.update(queues=[]), "queues"),
        (lambda r: r["brokers"][1].update(role="primary"), "brokers"),
        (lambda r: r["brokers"][0].update(broker_id="my-broker"), "brokers[0].broker_id"),
        (lambda r: r["brokers"][0].update(openwire=["amqp://host:5671"]), "brokers[0].openwire"),
        (lambda r: r["brokers"][0].update(openwire=[]), "brokers[0].openwire"),
        (lambda r: r["brokers"][0].update(openwire=["ssl://h?maxReconnectDelay=1:61617"]), "brokers[0].openwire"),
        (lambda r: r["brokers"][0].update(openwire=["ssl://host:61617\n"]), "brokers[0].openwire"),
        (lambda r: r["brokers"][0].update(openwire=["ssl://host:\u0666\u0661\u0666"]), "brokers[0].openwire"),
        (lambda r: r["brokers"][0].update(openwire=["ssl://host:99999"]), "brokers[0].openwire"),
        (lambda r: r["brokers"][0].update(openwire=["ssl://host:0"]), "brokers[0].openwire"),
        (lambda r: r["brokers"][0].update(openwire=["ssl://h\u00f6st:61617"]), "brokers[0].openwire"),
        (lambda r: r["brokers"][0].update(stomp=["stomp+ssl://host:61614\n"]), "brokers[0].stomp"),
        (lambda r: r["brokers"][0].update(broker_id="local-pair\n"), "brokers[0].broker_id"),
        (lambda r: r["brokers"][0].update(broker_id="local-"), "brokers[0].broker_id"),
        (lambda r: r["access"].update(application_queues=["APP.>\n"]), "access.application_queues"),
        (lambda r: r["tuning"]["bridge"].update(max_reconnect_delay_ms=500), "tuning.bridge.max_reconnect_delay_ms"),
        (lambda r: r["brokers"][0].pop("credentials_secret"), "brokers[0].credentials_secret"),
        (lambda r: r["brokers"][0].update(credentials_secret="my secret"), "brokers[0].credentials_secret"),
        (lambda r: r["brokers"][0].update(credentials_secret="s" * 513), "brokers[0].credentials_secret"),
        (lambda r: r["brokers"][0].update(crdr=True), "brokers"),
        (lambda r: r["tuning"]["bridge"].update(prefetch=10), "tuning.bridge.prefetch"),
        (lambda r: r["tuning"]["dr"].update(max_page_size=10), "tuning.dr.max_page_size"),
        # A boolean is not a number: read as 1 it would be a 1 MB DR queue that pages nothing in.
        (lambda r: r["tuning"]["dr"].update(memory_limit_mb=True), "tuning.dr.memory_limit_mb"),
        (lambda r: r["tuning"].update(queues_at_once=0), "tuning.queues_at_once"),
        (lambda r: r["tuning"].update(queues_at_once=65), "tuning.queues_at_once"),
        (lambda r: r["tuning"].update(queues_at_once=True), "tuning.queues_at_once"),
        (lambda r: r.update(dr_suffix="DR"), "dr_suffix"),
        (lambda r: r.update(dr_suffix="." + "D" * 33), "dr_suffix"),
        (lambda r: r.update(version=2), "version"),
        (lambda r: r.update(version=True), "version"),
    ],
)
def test_an_invalid_topology_names_the_offending_field(raw: dict[str, Any], mutate: Any, field: str) -> None:
    broken = copy.deepcopy(raw)
    mutate(broken)

    error = _error_for(broken)

    assert error.field == field
    assert str(error).startswith(f"topology: {field}: ")


def test_a_file_that_is_not_yaml_gives_one_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "topology.yaml"
    bad.write_text("brokers: [unclosed\n")

    with pytest.raises(TopologyError, match="not valid YAML"):
        load_topology(bad)


def test_a_missing_file_gives_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(TopologyError, match="cannot read"):
        load_topology(tmp_path / "nope.yaml")


def test_a_file_without_end_is_refused_after_a_megabyte_not_read_forever() -> None:
    with pytest.raises(TopologyError, match="larger than"):
        load_topology("/dev/zero")


def test_a_file_that_is_not_utf8_text_gives_one_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "topology.yaml"
    bad.write_bytes(b"\xff\xfebrokers: []\n")

    with pytest.raises(TopologyError, match="not UTF-8 text"):
        load_topology(bad)


def test_nesting_deeper_than_the_parser_can_follow_is_refused_not_a_crash(tmp_path: Path) -> None:
    bad = tmp_path / "topology.yaml"
    bad.write_text("brokers: " + "[" * 5_000 + "]" * 5_000 + "\n")

    with pytest.raises(TopologyError, match="nests too deeply"):
        load_topology(bad)


@pytest.mark.parametrize(
    "text",
    [
        "a: &a [*a]\nbrokers: *a\n",  # a list that holds itself
        "\n".join(  # nine aliases each used nine times: 9**9 values once expanded
            ["l0: &l0 [x, x, x, x, x, x, x, x, x]"]
            + [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]" for i in range(1, 9)]
            + ["brokers: *l8"]
        ),
    ],
    ids=["recursive-alias", "billion-laughs"],
)
def test_aliases_that_expand_without_bound_are_refused_before_validation(tmp_path: Path, text: str) -> None:
    bad = tmp_path / "topology.yaml"
    bad.write_text(text)

    with pytest.raises(TopologyError, match="expands to more than"):
        load_topology(bad)


@pytest.mark.parametrize(
    ("change", "line"),
    [
        (lambda text: text + "\nqueues:\n  - name: INVOICES\n    mode: sync\n", "queues"),
        (lambda text: text.replace("    mode: mirror ", "    mode: sync\n    mode: mirror ", 1), "mode"),
    ],
    ids=["second-queues-header", "a-queue-field-twice"],
)
def test_a_key_given_twice_is_refused_where_yaml_would_keep_the_last(
    topology_path: Path, tmp_path: Path, change: Callable[[str], str], line: str
) -> None:
    twice = tmp_path / "topology.yaml"
    twice.write_text(change(topology_path.read_text()))

    with pytest.raises(TopologyError, match=re.escape(f"found '{line}' a second time\n  in \"{twice}\", line ")):
        load_topology(twice)


def test_a_merged_key_may_be_overridden_as_yaml_means(topology_path: Path, tmp_path: Path) -> None:
    merged = tmp_path / "topology.yaml"
    text = topology_path.read_text().replace(
        "  - name: ORDERS\n    mode: sync\n", "  - &orders\n    name: ORDERS\n    mode: sync\n"
    )
    merged.write_text(
        text.replace("  - name: AUDIT\n    mode: mirror", "  - <<: *orders\n    name: AUDIT\n    mode: mirror")
    )

    audit = load_topology(merged).queue("AUDIT")

    assert (audit.name, audit.mode, audit.sync_key) == ("AUDIT", "mirror", "correlation-id")


def test_an_alias_used_as_a_topology_would_use_one_is_accepted(topology_path: Path, tmp_path: Path) -> None:
    shared = tmp_path / "topology.yaml"
    text = topology_path.read_text().replace("receipt_groups: [receipt-writers]", "receipt_groups: &groups [users]")
    shared.write_text(text.replace("application_groups: [users]", "application_groups: *groups"))

    assert load_topology(shared).access.receipt_groups == ["users"]
