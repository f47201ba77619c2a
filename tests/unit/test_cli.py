"""The CLI's conventions: help for people, a version, exit codes that mean one thing, no tracebacks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import brokersync_cli.main as main_module
from brokersync_cli.main import main

ROOT = Path(__file__).resolve().parents[2]
TOPOLOGY = str(ROOT / "topology.yaml")
ACTIVE_ACTIVE = str(ROOT / "examples" / "active-active.yaml")


def test_help_is_plain_text_with_examples_and_the_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--help"])

    out = capsys.readouterr().out
    assert exited.value.code == 0
    assert "examples:" in out and "exit codes:" in out
    assert "``" not in out and ":class:" not in out


def test_version_names_the_package(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--version"])

    assert exited.value.code == 0
    assert capsys.readouterr().out.startswith("brokersync ")


def test_an_unknown_option_is_a_usage_error() -> None:
    with pytest.raises(SystemExit) as exited:
        main(["render", "--role", "tertiary"])

    assert exited.value.code == 2


@pytest.mark.parametrize(
    "argv",
    [
        ["render", "--role", "primary", "--topology", "/nonexistent/topology.yaml"],
        ["drill", "--mode", "failover", "--topology", "/nonexistent/topology.yaml"],
        ["render", "--role", "primary", "--topology", TOPOLOGY, "--base", "/nonexistent/base.xml"],
        ["cost", "--prices", "/nonexistent/prices.json"],
    ],
)
def test_a_missing_input_file_is_a_usage_error_in_one_line(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("brokersync: ") and "Traceback" not in err and err.count("\n") == 1


@pytest.mark.parametrize("pair", ["Orders", "a b", "../orders", "x" * 33, "-orders", ""])
@pytest.mark.parametrize("command", ["status", "failover", "switchover", "failback", "apply-config"])
def test_a_pair_name_no_stack_could_have_is_a_usage_error_before_aws_is_asked(
    command: str, pair: str, capsys: pytest.CaptureFixture[str]
) -> None:
    extra = ["--role", "dr"] if command == "apply-config" else []
    with pytest.raises(SystemExit) as exited:
        main([command, *extra, f"--pair={pair}", "--topology", TOPOLOGY])

    assert exited.value.code == 2
    assert "is not a PairName" in capsys.readouterr().err


@pytest.mark.parametrize("path", ["/dev/zero", "binary"], ids=["without-end", "not-utf8"])
@pytest.mark.parametrize(
    "argv",
    [
        ["render", "--role", "primary", "--topology", TOPOLOGY, "--base"],
        ["cost", "--prices"],
        ["render", "--role", "primary", "--topology"],
    ],
    ids=["base", "prices", "topology"],
)
def test_a_file_that_is_no_text_or_has_no_end_is_a_usage_error_in_one_line(
    argv: list[str], path: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if path == "binary":
        path = str(tmp_path / "binary")
        Path(path).write_bytes(b"\xff\xfe\x00\x01")

    assert main([*argv, path]) == 2
    err = capsys.readouterr().err
    assert err.startswith("brokersync: ") and "Traceback" not in err and err.count("\n") == 1


@pytest.mark.parametrize(
    "base",
    [
        "<broker",
        "<beans/>",
        '<broker xmlns="http://activemq.apache.org/schema/core"><plugins><unknownPlugin/></plugins></broker>',
    ],
)
def test_a_base_configuration_that_cannot_be_merged_is_a_usage_error_naming_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], base: str
) -> None:
    path = tmp_path / "base.xml"
    path.write_text(base)

    assert main(["render", "--role", "dr", "--topology", TOPOLOGY, "--base", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"brokersync: --base {path}: ") and err.count("\n") == 1


def test_an_invalid_topology_is_refused_before_anything_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    topology = tmp_path / "topology.yaml"
    topology.write_text("version: 1\nbrokers: []\n", encoding="utf-8")

    assert main(["drill", "--mode", "failover", "--topology", str(topology), "--state-dir", str(tmp_path / "s")]) == 2
    assert "brokers" in capsys.readouterr().err
    assert not (tmp_path / "s").exists()


def test_an_unknown_price_name_names_the_known_ones(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"usd_per_lambda_gb_secnd": 1.0}), encoding="utf-8")

    assert main(["cost", "--prices", str(prices)]) == 2
    err = capsys.readouterr().err
    assert "usd_per_lambda_gb_secnd" in err and "known:" in err


def test_a_debug_run_shows_the_traceback(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("BROKERSYNC_DEBUG", "1")

    assert main(["cost", "--prices", "/nonexistent/prices.json"]) == 2
    assert "Traceback" in capsys.readouterr().err


def test_an_installed_package_refuses_the_checkout_only_commands_with_a_sentence(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(main_module, "CHECKOUT", tmp_path)  # site-packages: no template, functions or jobs

    assert main_module.main(["drill", "--mode", "failover"]) == 2
    assert "runs from a source checkout" in capsys.readouterr().err


def test_a_drills_warm_up_reaches_its_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    import brokersync_local.drill as drill_module  # noqa: PLC0415 (the harness the command drives)
    import brokersync_local.interrupts as interrupts_module  # noqa: PLC0415

    seen = []
    monkeypatch.setattr(interrupts_module, "stop_on_interrupt", lambda: None)
    monkeypatch.setattr(drill_module, "run_drill", lambda settings, out: seen.append(settings) or {})

    assert main(["drill", "--mode", "failover", "--rate", "1000", "--warm-up", "15", "--topology", TOPOLOGY]) == 0
    assert seen[0].warm_up_s == 15.0 and seen[0].rate == 1000.0


@pytest.mark.parametrize("warm_up", ["-1", "nan", "soon"])
def test_a_warm_up_that_is_not_0_or_more_seconds_is_a_usage_error(warm_up: str) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["drill", "--mode", "failover", "--warm-up", warm_up])

    assert exited.value.code == 2


@pytest.mark.parametrize(
    "argv",
    [
        ["cost", "--rate", "-5"],
        ["cost", "--rate", "0"],
        ["cost", "--rate", "inf"],
        ["cost", "--rate", "nan"],
        ["cost", "--rate", "1e308"],
        ["drill", "--mode", "failover", "--rate", "0"],
        ["drill", "--mode", "failover", "--duration", "-3"],
        ["drill", "--mode", "failover", "--kill-at", "-1"],
        ["demo", "--rate", "fast"],
        ["copy-burst", "--messages", "0"],
        ["local", "up", "--primary-stomp", "99999"],
        ["status", "--rpo", "0"],
        ["apply-config", "--role", "dr", "--poll", "0"],
    ],
)
def test_a_number_that_cannot_be_meant_is_a_usage_error_naming_the_option(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(argv)

    assert exited.value.code == 2
    assert f"argument {argv[-2]}: " in capsys.readouterr().err


def test_a_cost_whose_prices_overflow_a_month_is_a_usage_error_not_infinity_in_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"usd_per_million_write_units": 1e308}))

    assert main(["cost", "--rate", "1000", "--prices", str(prices)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "overflows" in captured.err


def test_a_cost_at_a_positive_rate_is_still_priced(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cost", "--rate", "250"]) == 0
    assert json.loads(capsys.readouterr().out)["estimates"][0]["rate_msgs_per_s"] == 250.0


def test_aws_that_cannot_be_asked_is_one_line_naming_aws_and_exit_1(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """No credentials, no region, no route: botocore's own words, without its traceback."""
    from botocore.exceptions import NoCredentialsError  # noqa: PLC0415

    from brokersync_cli import operations  # noqa: PLC0415

    def no_credentials(_args: object) -> int:
        raise NoCredentialsError

    monkeypatch.setattr(operations, "cmd_transition", no_credentials)

    assert main(["failover", "--pair", "orders", "--topology", TOPOLOGY]) == 1
    assert capsys.readouterr().err == "brokersync: AWS: Unable to locate credentials\n"


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["drill", "--mode", "failover", "--queue", "NOPE"], "--queue NOPE: not a queue of the topology"),
        (["drill", "--mode", "move-queue"], "a move-queue drill needs an active-active queue"),
        (["demo", "--port-offset", "10000"], "--port-offset 10000: moves the demo's ports"),
    ],
)
def test_a_drill_that_cannot_run_on_what_it_names_is_refused_before_a_broker_starts(
    argv: list[str], said: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import brokersync_local.demo as demo_module  # noqa: PLC0415 (the harness the commands drive)
    import brokersync_local.drill as drill_module  # noqa: PLC0415

    started = []
    monkeypatch.setattr(drill_module, "run_drill", lambda *a, **k: started.append(a))
    monkeypatch.setattr(demo_module, "run_demo", lambda *a, **k: started.append(a))

    assert main([*argv, "--topology", TOPOLOGY]) == 2
    assert said in capsys.readouterr().err
    assert not started


def test_a_topology_without_a_queue_a_drill_can_count_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    topology = tmp_path / "topology.yaml"
    text = (ROOT / "topology.yaml").read_text(encoding="utf-8")
    topology.write_text(text.replace("correlation-id", "message-id"), encoding="utf-8")

    assert main(["drill", "--mode", "failover", "--topology", str(topology)]) == 2
    assert "keyed by correlation-id, and the topology has none" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["move-queue", "--to", "orders-usw2"], "name the queues to move, or --all-from BROKER"),
        (["move-queue", "CARTS", "--all-from", "orders-use1", "--to", "orders-usw2"], "name the queues to move"),
        (["move-queue", "NOPE", "--to", "orders-usw2"], "queue must be one of the topology's queues, got 'NOPE'"),
        (["move-queue", "ORDERS", "--to", "orders-usw2"], "ORDERS is a sync queue: only active-active queues"),
        (["move-queue", "--all-from", "mars", "--to", "orders-usw2"], "from must be one of"),
        (["move-queue", "CARTS", "--to", "mars"], "to must be one of"),
        (["move-queue", "CARTS", "--to", "orders-usw2", "--drain-timeout", "0"], "--drain-timeout 0"),
    ],
)
def test_a_queue_move_the_topology_cannot_hold_is_a_usage_error_before_aws_is_asked(
    argv: list[str], said: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from brokersync_cli import transitions  # noqa: PLC0415

    monkeypatch.setattr(transitions, "run_move", lambda *a, **k: pytest.fail("AWS was asked"))

    assert main([*argv, "--pair", "orders", "--topology", ACTIVE_ACTIVE]) == 2
    assert said in capsys.readouterr().err


def test_a_usage_error_is_exit_2_without_a_traceback_when_run_as_a_module(tmp_path: Path) -> None:
    """``python -m brokersync_cli.main`` imports the CLI twice; its usage errors must still be caught."""
    import os  # noqa: PLC0415
    import subprocess  # noqa: PLC0415
    import sys  # noqa: PLC0415

    env = {k: v for k, v in os.environ.items() if not k.startswith("BROKERSYNC_")}
    done = subprocess.run(
        [sys.executable, "-m", "brokersync_cli.main", "status", "--topology", TOPOLOGY],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=60,
        check=False,
    )

    assert done.returncode == 2
    assert done.stderr.startswith("brokersync: name the pair: --pair NAME") and "Traceback" not in done.stderr
