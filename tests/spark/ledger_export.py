"""Test data made the way production makes it: a real ledger in moto, exported as DynamoDB does.

Items are written by :class:`brokersync.ledger.Ledger` (so the encoding under test is the
real one), then scanned and written as a DYNAMODB_JSON export: gzipped lines of
``{"Item": {...}}`` under ``AWSDynamoDB/<export id>/data/``, binary values base64-encoded.
"""

from __future__ import annotations

import base64
import gzip
import json
from pathlib import Path
from typing import Any

import boto3

from brokersync.ledger import Ledger, dynamodb_ledger
from brokersync.ledger.schema import create_ledger_table

TABLE = "brokersync-ledger"
ROOT = Path(__file__).resolve().parents[2]


def moto_ledger() -> Ledger:
    """A ledger on moto's table (call inside ``mock_aws``)."""
    create_ledger_table(boto3.client("dynamodb", region_name="us-west-2"), TABLE, ROOT / "template.yaml")
    return dynamodb_ledger(TABLE, region="us-west-2")


def _typed(value: dict[str, Any]) -> dict[str, Any]:
    ((kind, inner),) = value.items()
    if kind == "B":
        return {kind: base64.b64encode(inner).decode()}
    if kind == "BS":
        return {kind: [base64.b64encode(v).decode() for v in inner]}
    return {kind: inner}


def export_lines() -> list[str]:
    """Every item of the table as one DYNAMODB_JSON export line."""
    client = boto3.client("dynamodb", region_name="us-west-2")
    lines = []
    for page in client.get_paginator("scan").paginate(TableName=TABLE):
        for item in page["Items"]:
            typed = {k: _typed(v) for k, v in item.items()}
            lines.append(json.dumps({"Item": typed}, separators=(",", ":")))  # compact, as DynamoDB writes
    return lines


def write_export(root: Path, lines: list[str], export_id: str = "01700000000000-abcdef12", files: int = 2) -> Path:
    """``root/AWSDynamoDB/<id>/data/<n>.json.gz`` (plus the manifest files a real export has)."""
    export = root / "AWSDynamoDB" / export_id
    (export / "data").mkdir(parents=True, exist_ok=True)
    for index in range(files):
        part = lines[index::files]
        (export / "data" / f"part-{index}.json.gz").write_bytes(gzip.compress(("\n".join(part) + "\n").encode()))
    (export / "manifest-summary.json").write_text(json.dumps({"itemCount": len(lines)}))
    return root


def write_snapshot(root: Path, queue: str, messages: list[dict[str, Any]], extra_lines: list[str] = ()) -> Path:
    """A snapshot as functions/snapshot_queues writes it (one part per queue here)."""
    folder = root / queue
    folder.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps({"queue": queue, **m}) for m in messages] + list(extra_lines)
    (folder / "part-00000.jsonl.gz").write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))
    return root


def write_manifest(root: Path, started_ms: int, lines: dict[str, int], truncated: list[str] = ()) -> None:
    root.mkdir(parents=True, exist_ok=True)
    manifest = {"broker": "x", "started_ms": started_ms, "finished_ms": started_ms, "lines": lines,
                "parts": [], "possibly_truncated": list(truncated)}  # fmt: skip
    (root / "_SUCCESS.json").write_text(json.dumps(manifest))
