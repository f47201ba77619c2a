"""``brokersync reconcile``: the Spark reconciliation job, run locally on local[2].

The same file AWS Glue runs (``jobs/reconcile/reconcile.py``) is loaded from the checkout;
``--repair`` records the purge list in the ledger named by ``--table`` (moto's, locally,
through ``--endpoint``) so the purge loop removes those messages.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from brokersync_local.deploy import LEDGER_TABLE as LOCAL_LEDGER_TABLE

JOB = Path(__file__).resolve().parents[2] / "jobs" / "reconcile" / "reconcile.py"


def load_job(path: Path = JOB) -> ModuleType:
    spec = importlib.util.spec_from_file_location("brokersync_reconcile_job", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load the reconciliation job from {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def add_parser(sub: Any) -> None:
    parser = sub.add_parser("reconcile", help="reconcile a ledger export with queue snapshots (Spark, local[2])")
    parser.add_argument("--export", required=True, help="DynamoDB export (the prefix, an export folder, or a glob)")
    parser.add_argument("--snapshot", required=True, help="the DR broker's snapshot folder")
    parser.add_argument("--primary-snapshot", help="the primary's snapshot folder (enables gone_from_primary)")
    parser.add_argument("--out", required=True, help="output folder")
    parser.add_argument("--repair", action="store_true", help="record the purge list in the ledger as pending keys")
    parser.add_argument(
        "--table",
        default=LOCAL_LEDGER_TABLE,
        help=f"ledger table for --repair (default: the local world's, {LOCAL_LEDGER_TABLE}; "
        "in AWS brokersync-<PairName>-ledger)",
    )
    parser.add_argument("--region", default=os.environ.get("AWS_DEFAULT_REGION"), help="ledger region for --repair")
    parser.add_argument("--endpoint", default=None, help="DynamoDB endpoint for --repair (moto locally)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

    def progress(line: str) -> None:
        print(f"reconcile: {line}", file=sys.stderr, flush=True)

    progress("starting Spark (local[2]; the first start takes a while)")
    job = load_job()
    spark = job.spark_session("local[2]")
    try:
        inputs = job.Inputs(args.export, args.snapshot, args.primary_snapshot)
        try:
            summary = job.run(
                spark,
                inputs,
                str(Path(args.out).resolve()),
                repair_table=args.table if args.repair else None,
                region=args.region,
                host=args.endpoint,
                progress=progress,
            )
        except job.ReconcileInputError as e:
            print(f"reconcile: {e}", file=sys.stderr)
            return 2
    finally:
        spark.stop()
    print(json.dumps({"totals": summary["totals"], "malformed_lines": summary["malformed_lines"],
                      "repaired": summary.get("repaired"), "report": str(Path(args.out) / "report.html")}))  # fmt: skip
    return 0
