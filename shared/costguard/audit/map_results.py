"""The audit Map's outcomes as its ResultWriter leaves them in S3: a manifest naming result files per status.

Step Functions writes, under ``<Prefix>/<map run id>/``, ``manifest.json`` (``DestinationBucket``,
``MapRunArn``, ``ResultFiles`` with a list of ``{"Key", "Size"}`` per status ``SUCCEEDED``, ``FAILED`` and
``PENDING``) and the result files themselves: each a JSON array of the child executions of that status, one record
each with ``ExecutionArn``, ``Name``, ``Status``, ``Input`` and ``Output`` as JSON *strings*, and ``Error`` and
``Cause`` for a failed one (AWS: "ResultWriter (Map)", exporting to Amazon S3). An item's own failures are caught
inside its child execution, which then succeeds with a failed outcome; a child that fails, times out or is
aborted anyway (or never ran) is named here from its input, with its status as the error.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from costguard.audit import store
from costguard.audit.steps import MapResults, RegionOutcome

STATUSES = ("SUCCEEDED", "FAILED", "PENDING")


def _decoded(value: Any) -> dict[str, Any]:
    """A record's Input or Output: a JSON string (as AWS writes it), or already an object."""
    if isinstance(value, str):
        value = json.loads(value) if value else {}
    return value if isinstance(value, dict) else {}


def outcome_of(record: dict[str, Any]) -> RegionOutcome:
    """One child execution's record as the item's outcome."""
    status = record.get("Status", "PENDING")
    if status == "SUCCEEDED":
        return RegionOutcome.model_validate(_decoded(record.get("Output")))
    item = _decoded(record.get("Input"))
    return RegionOutcome(
        account=item.get("account"),
        account_name=item.get("account_name"),
        region=str(item.get("region") or "unknown"),
        status="failed",
        error=record.get("Error") or f"States.{status.title()}",
        cause=record.get("Cause") or f"the item's child execution ended {status}, not SUCCEEDED",
    )


def outcomes(results: MapResults) -> Iterator[RegionOutcome]:
    """Every item's outcome, read file by file from the manifest's result files."""
    manifest = store.get_json(results.bucket, results.key)
    bucket = manifest.get("DestinationBucket") or results.bucket
    files = manifest.get("ResultFiles") or {}
    for status in STATUSES:
        for file in files.get(status) or []:
            for record in store.get_json(bucket, file["Key"]):
                yield outcome_of(record)
