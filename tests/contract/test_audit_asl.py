"""statemachine/audit.asl.json passes a state machine validator: cfn-lint's Step Functions schema (E3601, the
SAM virtual environment's cfn-lint) and a check that every transition lands on a state of its scope."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from costguard.local.template import Template
from tests.conftest import ROOT

ASL = ROOT / "statemachine" / "audit.asl.json"
MAP = "AccountRegions"
CFN_LINT = ROOT / ".venv-sam" / "bin" / "cfn-lint"


def as_template(definition: dict[str, Any]) -> dict[str, Any]:
    """The definition inside a plain CloudFormation state machine, substitutions as the template declares."""
    substitutions = Template.load(ROOT / "template.yaml").resources["AuditStateMachine"]["Properties"][
        "DefinitionSubstitutions"
    ]
    return {
        "AWSTemplateFormatVersion": "2010-09-09",
        "Resources": {
            "Audit": {
                "Type": "AWS::StepFunctions::StateMachine",
                "Properties": {
                    "RoleArn": "arn:aws:iam::123456789012:role/audit",
                    "Definition": definition,
                    "DefinitionSubstitutions": {
                        name: f"arn:aws:lambda:us-east-1:123456789012:function:{name}"
                        for name in substitutions
                    },
                },
            }
        },
    }


def lint(definition: dict[str, Any], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    assert CFN_LINT.exists(), "cfn-lint is missing: run `make setup` (it comes with the SAM CLI)"
    path = tmp_path / "audit.json"
    path.write_text(json.dumps(as_template(definition)))
    return subprocess.run([str(CFN_LINT), str(path)], capture_output=True, text=True, timeout=120)


def scopes(machine: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The top-level states and every Map's or Parallel's own."""
    yield machine
    for state in machine["States"].values():
        for inner in [state.get("ItemProcessor") or state.get("Iterator"), *state.get("Branches", [])]:
            if inner:
                yield from scopes(inner)


def dangling(machine: dict[str, Any]) -> list[str]:
    problems = []
    for scope in scopes(machine):
        names = set(scope["States"])
        if scope["StartAt"] not in names:
            problems.append(f"StartAt {scope['StartAt']}")
        for name, state in scope["States"].items():
            targets = [state.get("Next"), state.get("Default")]
            targets += [c.get("Next") for c in state.get("Catch", []) + state.get("Choices", [])]
            problems += [f"{name} -> {t}" for t in targets if t and t not in names]
            if (
                not state.get("Next")
                and not state.get("End")
                and state["Type"] not in ("Choice", "Succeed", "Fail")
            ):
                problems.append(f"{name} neither ends nor goes on")
    return problems


def test_the_audit_definition_passes_the_validator(tmp_path: Path) -> None:
    definition = json.loads(ASL.read_text())
    result = lint(definition, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert dangling(definition) == []


@pytest.mark.parametrize(
    ("breakage", "expected"),
    [
        (lambda d: d["States"]["Report"].pop("Resource"), "E3601"),
        (lambda d: d["States"][MAP]["ItemProcessor"]["States"]["Discover"].update(Typo=1), "E3601"),
    ],
)
def test_the_validator_rejects_a_broken_definition(breakage: Any, expected: str, tmp_path: Path) -> None:
    definition = json.loads(ASL.read_text())
    breakage(definition)
    result = lint(definition, tmp_path)
    assert result.returncode != 0
    assert expected in result.stdout


def test_a_transition_to_no_state_is_caught() -> None:
    definition = json.loads(ASL.read_text())
    definition["States"][MAP]["ItemProcessor"]["States"]["Discover"]["Catch"][0]["Next"] = "Nowhere"
    assert dangling(definition) == ["Discover -> Nowhere"]


def test_every_task_catches_failures_inside_the_item_map() -> None:
    # A failed (account, region) must reach RegionFailed (and so the report), never fail the whole execution.
    definition = json.loads(ASL.read_text())
    inner = definition["States"][MAP]["ItemProcessor"]["States"]
    for name, state in inner.items():
        if state["Type"] == "Task":
            assert [c["ErrorEquals"] for c in state["Catch"]] == [["States.ALL"]], name
            assert state["Catch"][0]["Next"] == "RegionFailed"


def test_the_map_iterates_plan_items_as_a_distributed_map() -> None:
    """One item per (account, region), each a child execution: the Map's history and its output stay within
    one execution's limits however large the organization. A distributed map runs STANDARD children here
    (moto runs them; a heavy region's metric read may outlast EXPRESS's five minutes)."""
    definition = json.loads(ASL.read_text())
    assert definition["States"]["Plan"]["ResultSelector"]["items.$"] == "$.Payload.items"
    assert definition["States"]["Plan"]["Parameters"]["Payload"]["state_machine.$"] == "$$.StateMachine.Id"
    items = definition["States"][MAP]
    assert items["ItemProcessor"]["ProcessorConfig"] == {"Mode": "DISTRIBUTED", "ExecutionType": "STANDARD"}
    assert 1 <= items["MaxConcurrency"] <= 100
    selected = items["ItemSelector"]
    assert selected["account.$"] == "$$.Map.Item.Value.account"
    assert selected["region.$"] == "$$.Map.Item.Value.region"
    assert selected["account_name.$"] == "$$.Map.Item.Value.account_name"


def test_no_list_of_items_or_outcomes_passes_through_the_state() -> None:
    """Step Functions caps a state's payload at 256 KB: inline, 17,000 items (about 100 bytes each) would pass it
    at about 2,500, and a hundred failed items' error payloads would too. The Map reads Plan's JSON array from
    S3 (ItemReader, GetObject, InputType JSON) and writes its children's outcomes to S3 (ResultWriter, PutObject);
    the state keeps the manifest's address, which the report reads. Both in the audit bucket the template names."""
    definition = json.loads(ASL.read_text())
    items = definition["States"][MAP]
    assert "ItemsPath" not in items
    assert items["ItemReader"] == {
        "Resource": "arn:aws:states:::s3:getObject",
        "ReaderConfig": {"InputType": "JSON"},
        "Parameters": {"Bucket": "${AuditBucket}", "Key.$": "$.items.key"},
    }
    writer = items["ResultWriter"]
    assert writer["Resource"] == "arn:aws:states:::s3:putObject"
    assert writer["Parameters"]["Bucket"] == "${AuditBucket}"
    assert writer["Parameters"]["Prefix"].startswith("runs/")  # expired with the run's other intermediates
    assert items["ResultSelector"] == {"manifest.$": "$.ResultWriterDetails"}
    assert definition["States"]["Report"]["Parameters"]["Payload"] == {
        "run.$": "$.run",
        "now.$": "$.now",
        "results.$": f"{items['ResultPath']}.manifest",
    }
    # A child that fails outright (not caught inside it) is named in the report from its FAILED record rather
    # than failing the whole run.
    assert items["ToleratedFailurePercentage"] == 100


def test_each_item_carries_its_account_and_a_failure_names_it() -> None:
    definition = json.loads(ASL.read_text())
    inner = definition["States"][MAP]["ItemProcessor"]["States"]
    for name in ("Discover", "ReadMetrics"):
        selector = inner[name]["ResultSelector"]
        for field in ("account", "account_name", "region", "run", "now"):
            assert selector[f"{field}.$"] == f"$.Payload.{field}", (name, field)
    assert inner["Evaluate"]["OutputPath"] == "$.Payload"
    assert inner["RegionFailed"]["Parameters"] == {
        "account.$": "$.account",
        "account_name.$": "$.account_name",
        "region.$": "$.region",
        "status": "failed",
        "error.$": "$.failure.Error",
        "cause.$": "$.failure.Cause",
    }
