"""Benchmark results files: what they hold, how repeated runs are summed up, and how the docs read them."""

from __future__ import annotations

import argparse
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

import brokersync_ci.bench_results as bench_results_module
from brokersync_ci.bench_results import (
    INTERRUPTED_EXIT,
    REQUIRED,
    alternating,
    commit,
    exit_code,
    load,
    measured_changes,
    performance_page,
    record,
    render_page,
    run_repeated,
    spread,
)

ROOT = Path(__file__).resolve().parents[2]


def test_a_results_file_names_its_command_commit_date_and_machine(tmp_path: Path) -> None:
    written = record(
        "copy",
        {"speedup": 1.9},
        tmp_path / "copy.json",
        argv=[str(ROOT / "bench" / "bridge_copy.py"), "--bridges", "2"],
    )

    document = json.loads(written.read_text())
    assert set(REQUIRED) <= set(document)
    assert document["command"] == ".venv/bin/python bench/bridge_copy.py --bridges 2"
    assert document["machine"]["cores"] >= 1 and document["result"] == {"speedup": 1.9}


def test_a_path_inside_the_checkout_is_recorded_from_its_root_so_the_command_works_in_any_clone(
    tmp_path: Path,
) -> None:
    results = ROOT / "bench" / "results" / "copy_elsewhere.json"
    written = record(
        "copy",
        {},
        tmp_path / "copy.json",
        argv=[
            str(ROOT / "bench" / "bridge_copy.py"),
            "--results",
            str(results),
            f"--topology={ROOT / 'topology.yaml'}",
        ],
    )

    command = json.loads(written.read_text())["command"]
    assert command == (
        ".venv/bin/python bench/bridge_copy.py --results bench/results/copy_elsewhere.json --topology=topology.yaml"
    )


def test_a_path_outside_the_checkout_is_recorded_as_given(tmp_path: Path) -> None:
    written = record("copy", {}, tmp_path / "copy.json", argv=["bench/bridge_copy.py", "--results", "/tmp/x.json"])

    assert json.loads(written.read_text())["command"] == ".venv/bin/python bench/bridge_copy.py --results /tmp/x.json"


def test_repeated_runs_are_kept_whole_with_the_median_min_max_and_spread_of_each_figure() -> None:
    figures = iter(
        [
            {"rate": 90, "deep": {"s": 1.0}, "ok": True},
            {"rate": 110, "deep": {"s": 3.0}, "ok": True},
            {"rate": 100, "deep": {"s": 2.0}, "ok": True},
        ]
    )

    result = run_repeated(lambda: next(figures), 3, lambda _line: None)

    assert len(result["runs"]) == 3
    assert result["spread"]["rate"] == {"median": 100, "min": 90, "max": 110, "spread": 0.2}
    assert result["spread"]["deep"]["s"]["median"] == 2.0
    assert "ok" not in result["spread"]


def test_spread_of_a_figure_whose_median_is_zero_is_not_a_division_by_zero() -> None:
    assert spread([{"lost": 0}, {"lost": 0}])["lost"]["spread"] is None


def test_a_page_is_filled_from_the_results_with_numbers_as_people_read_them() -> None:
    results = {
        "sync": {
            "command": "c",
            "commit": "abc",
            "measured_on": "d",
            "machine": {"cores": 2, "cpu": "x", "memory_gib": 24, "activemq": "5.17"},
            "result": {"rate": 12345.6, "ratio": 0.8512, "rto": None},
        }
    }

    page = render_page(
        "{{ results.sync.result.rate | n }} at {{ results.sync.result.ratio | n(2) }}x, "
        "RTO {{ results.sync.result.rto | n }}\n{{ measured('sync') }}",
        results,
    )

    assert page.startswith("12,346 at 0.85x, RTO -\n*Measured by `c` at abc on d; 2 cores (x), 24 GiB, ActiveMQ 5.17.*")


def test_a_figure_no_results_file_holds_fails_the_page() -> None:
    with pytest.raises(Exception, match="speedup"):
        render_page("{{ results.copy.result.speedup }}", {"copy": {"result": {}}})


def test_a_results_file_named_like_a_dict_method_is_the_file() -> None:
    assert render_page("{{ results.copy.result.speedup }}", {"copy": {"result": {"speedup": 1.9}}}) == "1.9"


def test_a_page_reads_several_files_results_in_the_order_it_names_them() -> None:
    results = {"after": {"result": {"x": 2}}, "before": {"result": {"x": 1}}}

    page = render_page("{% for r in results_of(['before', 'after']) %}{{ r.x }};{% endfor %}", results)

    assert page == "1;2;"


def test_a_results_file_without_its_command_is_refused(tmp_path: Path) -> None:
    (tmp_path / "copy.json").write_text(json.dumps({"result": {}}))

    with pytest.raises(ValueError, match="has no command, commit, measured_on, machine"):
        load(tmp_path)


def test_every_committed_results_file_says_how_it_was_made() -> None:
    for name, document in load().items():
        assert document["command"].startswith(".venv/bin/python bench/"), name
        assert str(ROOT) not in document["command"], name  # works as written in any clone


def test_a_benchmark_can_print_without_writing_a_results_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from brokersync_ci.bench_results import finish  # noqa: PLC0415

    finish("copy", {"speedup": 2.0}, argparse.Namespace(no_record=True, results=tmp_path / "copy.json"))

    assert json.loads(capsys.readouterr().out) == {"speedup": 2.0}
    assert not (tmp_path / "copy.json").exists()


def test_the_performance_page_is_the_rendering_of_its_template_and_the_committed_results() -> None:
    assert (ROOT / "docs" / "performance.md").read_text() == performance_page(), "run make performance-page"


def test_a_section_whose_benchmark_has_not_run_says_what_to_run_instead_of_a_figure() -> None:
    page = render_page(
        '{% if "copy" in results %}{{ results.copy.result.speedup }}{% else %}'
        '{{ not_measured("copy", ".venv/bin/python bench/copy.py") }}{% endif %}',
        {},
    )

    assert "no `bench/results/copy.json`" in page and "Run `.venv/bin/python bench/copy.py`" in page


def test_results_files_of_one_command_are_credited_in_one_line_with_their_dates() -> None:
    machine = {"cores": 2, "cpu": "x", "memory_gib": 24, "activemq": "5.17"}
    documents = [
        {"command": "drills", "commit": "abc", "measured_on": day, "machine": machine}
        for day in ("2026-11-25 01:43", "2026-11-25 01:39", "2026-11-25 01:40")
    ]

    line = render_page("{{ measured_all(['a', 'b', 'c']) }}", dict(zip("abc", documents, strict=True)))

    assert line.count("Measured by") == 1
    assert "on 2026-11-25 01:39 to 2026-11-25 01:43;" in line


def test_two_ways_alternate_so_that_neither_always_runs_first_nor_always_right_after_the_other() -> None:
    assert alternating(("kept", "per_call"), 3) == [
        "kept", "per_call", "per_call", "kept", "kept", "per_call"
    ]  # fmt: skip


def test_three_ways_go_there_and_back_so_that_each_runs_as_often_first_last_and_in_between() -> None:
    assert alternating(("a", "b", "c"), 4) == [
        "a", "b", "c", "c", "b", "a", "a", "b", "c", "c", "b", "a"
    ]  # fmt: skip


def test_a_changed_results_file_does_not_make_the_measured_code_dirty() -> None:
    """A series of runs rewrites its results files as it goes; the code under measurement is the same."""
    assert measured_changes(" M bench/results/purge_connections.json\nA  bench/results/new.json\n") == []


def _checkout(tmp_path: Path) -> Path:
    """A git checkout with a results file and a module committed."""
    (tmp_path / "bench" / "results").mkdir(parents=True)
    (tmp_path / "bench" / "results" / "a.json").write_text("{}\n")
    (tmp_path / "code.py").write_text("x = 1\n")
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    for args in (["init", "-q"], ["add", "."], ["commit", "-q", "-m", "first"]):
        subprocess.run([*git, *args], check=True, capture_output=True)
    return tmp_path


def test_a_checkout_whose_only_change_is_a_results_file_is_measured_clean(tmp_path: Path) -> None:
    """The first line of git's status starts with a space when the change is not staged."""
    checkout = _checkout(tmp_path)
    (checkout / "bench" / "results" / "a.json").write_text('{"rewritten": true}\n')

    assert not commit(checkout).endswith("+dirty")


def test_a_checkout_with_a_changed_module_is_measured_dirty(tmp_path: Path) -> None:
    checkout = _checkout(tmp_path)
    (checkout / "code.py").write_text("x = 2\n")

    assert commit(checkout).endswith("+dirty")


def test_any_other_change_does() -> None:
    changed = " M layers/brokersync/purge/remover.py\nR  bench/results/a.json -> bench/a.json\n"

    assert measured_changes(changed) == ["layers/brokersync/purge/remover.py", "bench/a.json"]


def test_a_bench_stopped_by_an_interrupt_exits_130_with_one_line_not_a_traceback(
    capsys: pytest.CaptureFixture[str],
) -> None:
    def interrupted() -> int:
        raise KeyboardInterrupt

    assert exit_code(interrupted) == INTERRUPTED_EXIT == 130
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "interrupted" in err and "Traceback" not in err


def test_a_bench_that_returns_gives_its_own_exit_code() -> None:
    assert exit_code(lambda: 3) == 3
    assert exit_code(lambda: None) == 0


def test_every_bench_exits_through_the_interrupt_handling_wrapper() -> None:
    for bench in sorted((ROOT / "bench").glob("*.py")):
        if bench.name == "sync_functions.py":  # a worker the sync bench starts, not a bench of its own
            continue
        assert "sys.exit(bench_results.exit_code(main))" in bench.read_text(), bench.name


def _bench_recording_one_run(path: Path) -> dict[str, Any]:
    """What a bench run through ``exit_code`` writes when it records one result."""

    def bench() -> int:
        record("run", {"x": 1}, path, argv=["bench/x.py"])
        return 0

    assert exit_code(bench) == 0
    return json.loads(path.read_text())


def test_a_bench_records_the_commit_it_started_on_and_says_when_the_checkout_moved_during_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    heads = iter(["aaaaaaa", "bbbbbbb"])
    monkeypatch.setattr(bench_results_module, "commit", lambda: next(heads))

    document = _bench_recording_one_run(tmp_path / "run.json")

    assert (document["commit"], document["commit_at_end"]) == ("aaaaaaa", "bbbbbbb")


def test_a_bench_whose_checkout_did_not_move_records_one_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bench_results_module, "commit", lambda: "aaaaaaa")

    document = _bench_recording_one_run(tmp_path / "run.json")

    assert document["commit"] == "aaaaaaa" and "commit_at_end" not in document
