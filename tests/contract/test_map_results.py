"""The audit Map's items and outcomes in S3, held to Step Functions' documented behaviour where moto falls short.

moto runs the S3 ItemReader but its ResultWriter writes an empty manifest: local/map_results.py writes what AWS
documents ("ResultWriter (Map)": ``<Prefix>/<map run id>/manifest.json`` naming ``SUCCEEDED_n.json``,
``FAILED_n.json`` and ``PENDING_n.json``, each a JSON array of child-execution records whose ``Input`` and
``Output`` are JSON strings, a failed one with ``Error`` and ``Cause``). These tests hold the stand-in to that
shape, the report's reader to every status of it, and run an organization of 1,000 accounts x 17 regions
through Plan and Report with the S3 calls counted.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from moto import mock_aws

from costguard.audit import map_results
from costguard.audit.report import region_result
from costguard.audit.steps import MapResults, PlanInput, ReportInput
from costguard.aws import clients, organization
from costguard.aws.organization import Account
from costguard.flows import audit_plan, audit_report
from costguard.local.map_results import result_files
from costguard.settings import parse_settings

BUCKET = "costguard-audit-reports"
NOW = datetime(2026, 11, 20, 12, tzinfo=UTC)
MAP_RUN = "arn:aws:states:us-east-1:111111111111:mapRun:costguard-audit/AccountRegions:0f1e2d3c"
# The 17 regions of an organization with most regions enabled.
REGIONS = [
    "us-east-1", "us-east-2", "us-west-1", "us-west-2", "ca-central-1", "eu-west-1", "eu-west-2", "eu-west-3",
    "eu-central-1", "eu-north-1", "ap-south-1", "ap-northeast-1", "ap-northeast-2", "ap-northeast-3",
    "ap-southeast-1", "ap-southeast-2", "sa-east-1",
]  # fmt: skip
STATE_LIMIT = 256 * 1024


@pytest.fixture
def s3() -> Iterator[Any]:
    with mock_aws():
        clients.reset()
        made = clients.client("s3", "us-east-1")
        made.create_bucket(Bucket=BUCKET)
        clients.calls.clear()
        yield made
    clients.reset()


def documented_record(status: str, item: dict[str, Any], output: Any = None, **extra: Any) -> dict[str, Any]:
    """A child execution's record as AWS documents it (Transformation NONE, the default when exporting)."""
    record = {
        "ExecutionArn": f"arn:aws:states:us-east-1:111111111111:execution:costguard-audit/AccountRegions:{status}",
        "Input": json.dumps(item),
        "InputDetails": {"Included": True},
        "Name": status.lower(),
        "RedriveCount": 0,
        "RedriveStatus": "NOT_REDRIVABLE",
        "RedriveStatusReason": f"Execution is {status} and cannot be redriven",
        "StartDate": "2026-11-20T12:00:01.000Z",
        "StateMachineArn": "arn:aws:states:us-east-1:111111111111:stateMachine:costguard-audit/AccountRegions",
        "Status": status,
        "StopDate": "2026-11-20T12:03:01.000Z",
    }
    if output is not None:
        record |= {"Output": json.dumps(output), "OutputDetails": {"Included": True}}
    return record | extra


def test_the_stand_in_writes_what_aws_documents() -> None:
    outputs = [{"account": "222222222222", "account_name": "research", "region": "us-east-1", "status": "ok"}]
    objects, details = result_files(BUCKET, "runs/map-results", MAP_RUN, outputs)
    (results_key, body), (manifest_key, manifest_body) = objects
    assert results_key == "runs/map-results/0f1e2d3c/SUCCEEDED_0.json"
    assert manifest_key == "runs/map-results/0f1e2d3c/manifest.json"  # written last: it names the others
    assert details == {"MapRunArn": MAP_RUN, "ResultWriterDetails": {"Bucket": BUCKET, "Key": manifest_key}}
    assert json.loads(manifest_body) == {
        "DestinationBucket": BUCKET,
        "MapRunArn": MAP_RUN,
        "ResultFiles": {"FAILED": [], "PENDING": [], "SUCCEEDED": [{"Key": results_key, "Size": len(body)}]},
    }
    [record] = json.loads(body)
    assert record["Status"] == "SUCCEEDED"
    assert isinstance(record["Input"], str) and isinstance(record["Output"], str)  # JSON strings, as AWS
    assert json.loads(record["Output"]) == outputs[0]
    assert json.loads(record["Input"])["region"] == "us-east-1"


def test_the_report_reads_every_status_as_aws_writes_it(s3: Any) -> None:
    ok = {"account": "222222222222", "account_name": "research", "region": "us-east-1", "status": "ok"}
    caught = ok | {"region": "us-west-2", "status": "failed", "error": "States.TaskFailed", "cause": "denied"}
    item = {
        "account": "333333333333",
        "account_name": "vision",
        "region": "eu-west-1",
        "run": "r",
        "now": "x",
    }
    files = {
        "SUCCEEDED": [documented_record("SUCCEEDED", ok, ok), documented_record("SUCCEEDED", ok, caught)],
        "FAILED": [documented_record("FAILED", item, Error="States.Runtime", Cause="payload too large")],
        "PENDING": [documented_record("PENDING", item | {"region": "sa-east-1"})],
    }
    listed: dict[str, list[dict[str, Any]]] = {}
    for status, records in files.items():
        key = f"runs/map-results/0f1e2d3c/{status}_0.json"
        s3.put_object(Bucket=BUCKET, Key=key, Body=json.dumps(records).encode())
        listed[status] = [{"Key": key, "Size": 1}]
    manifest = {"DestinationBucket": BUCKET, "MapRunArn": MAP_RUN, "ResultFiles": listed}
    s3.put_object(Bucket=BUCKET, Key="runs/map-results/0f1e2d3c/manifest.json", Body=json.dumps(manifest))
    found = list(
        map_results.outcomes(MapResults(Bucket=BUCKET, Key="runs/map-results/0f1e2d3c/manifest.json"))
    )
    assert [(o.account, o.region, o.status, o.error) for o in found] == [
        ("222222222222", "us-east-1", "ok", None),
        ("222222222222", "us-west-2", "failed", "States.TaskFailed"),  # caught inside the child
        ("333333333333", "eu-west-1", "failed", "States.Runtime"),  # the child itself failed
        ("333333333333", "sa-east-1", "failed", "States.Pending"),  # never ran
    ]
    assert found[2].cause == "payload too large" and found[2].account_name == "vision"
    assert "PENDING" in str(found[3].cause)


def test_an_organization_of_17000_account_regions_passes_only_keys(
    s3: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """1,000 accounts x 17 regions: Plan writes 17,000 items to S3 and hands on a key; the outcomes come back
    through the manifest; the report reads three objects (the manifest, one result file, and the pointer to the
    previous report it compares with), not one per item, as each item's small result travels in its outcome."""
    accounts = [Account(f"{100000000000 + n}", f"team-{n}") for n in range(1000)]
    directory = type("Directory", (), {"active": lambda self: accounts})()
    monkeypatch.setattr(organization, "directory", lambda: directory)
    settings = parse_settings(
        member_role_name="costguard-member", regions=",".join(REGIONS), audit_bucket=BUCKET
    )
    step = PlanInput(execution="run-1", started=NOW, state_machine="arn:aws:states:us-east-1:111111111111:x")
    planned = audit_plan.plan_run(step, settings, "us-east-1")
    assert planned["items"] == {"key": "runs/run-1/items.json", "count": 17_000}
    assert len(json.dumps(planned)) < 1_000  # Plan's whole output, against 256 KB
    items = json.loads(s3.get_object(Bucket=BUCKET, Key="runs/run-1/items.json")["Body"].read())
    assert len(items) == 17_000 and len(json.dumps(items)) > STATE_LIMIT  # inline, it would not fit
    assert {(i["account"], i["region"]) for i in items} == {(a.id, r) for a in accounts for r in REGIONS}

    # Each child's output: an empty account-region's result inline (most of an organization has no GPU).
    outputs = []
    for item in items:
        result = region_result(
            item["region"], [], [], audited=0, monthly_cost_usd=0.0, team_tag="team", account=item["account"]
        )
        outputs.append(
            item | {"status": "ok", "result_key": "runs/run-1/x/result.json", "findings": 0, "result": result}
        )
    objects, details = result_files(BUCKET, "runs/map-results", MAP_RUN, outputs)
    for key, body in objects:
        s3.put_object(Bucket=BUCKET, Key=key, Body=body)
    assert len(json.dumps(details)) < 1_000
    clients.calls.clear()
    written = audit_report.report(
        ReportInput.model_validate({"run": "run-1", "now": NOW, "results": details["ResultWriterDetails"]}),
        settings,
    )
    assert clients.calls[("s3", "GetObject")] == 3  # the manifest, the result file, reports/latest.json
    assert written["totals"]["resources"] == 0 and written["totals"]["failed_regions"] == []
    document = json.loads(s3.get_object(Bucket=BUCKET, Key=written["report_key"])["Body"].read())
    assert len(document["regions"]) == 17_000
    assert len(document["accounts"]) == 1_000
