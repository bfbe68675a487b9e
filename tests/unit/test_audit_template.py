"""The audit's part of template.yaml: settings defaults, least-privilege roles and the reports bucket."""

from __future__ import annotations

from typing import Any

from costguard.local.template import Template
from costguard.settings import parse_settings
from tests.conftest import ROOT

TEMPLATE = Template.load(ROOT / "template.yaml")
AUDIT_FUNCTIONS = [
    "AuditPlanFunction",
    "AuditDiscoverFunction",
    "AuditMetricsFunction",
    "AuditEvaluateFunction",
    "AuditReportFunction",
]


def test_audit_settings_defaults_are_the_template_defaults() -> None:
    settings = parse_settings()
    defaults = TEMPLATE.parameter_defaults()
    assert settings.audit_lookback_days == int(defaults["AuditLookbackDays"])
    assert settings.audit_link_hours == int(defaults["AuditLinkHours"])
    assert settings.audit_rules_key == defaults["AuditRulesKey"]
    assert ",".join(settings.regions) == defaults["AuditRegions"]


def test_the_state_machine_may_invoke_exactly_the_audit_functions() -> None:
    props = TEMPLATE.resources["AuditStateMachine"]["Properties"]
    invoked = [
        p["LambdaInvokePolicy"]["FunctionName"]["Ref"] for p in props["Policies"] if "LambdaInvokePolicy" in p
    ]
    assert sorted(invoked) == sorted(AUDIT_FUNCTIONS)
    # Besides: its own child executions (the Distributed Map), on its own name only.
    own = [s for p in props["Policies"] if "Statement" in p for s in p["Statement"]]
    states = [s for s in own if s["Sid"] in ("StartItsOwnChildExecutions", "FollowItsOwnChildExecutions")]
    assert {a for s in states for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])} == {
        "states:StartExecution",
        "states:DescribeExecution",
        "states:StopExecution",
    }
    assert all("${AWS::StackName}-audit" in s["Resource"]["Fn::Sub"] for s in states)
    # And the Map's S3 reads and writes: Plan's items, its ResultWriter's outcomes, in the audit bucket only.
    s3 = {s["Sid"]: s["Resource"]["Fn::Sub"] for s in own if s not in states}
    assert s3 == {
        "ReadRunItems": "${AuditReportsBucket.Arn}/runs/*",
        "WriteMapResults": "${AuditReportsBucket.Arn}/runs/map-results/*",
    }
    substitutions = dict(props["DefinitionSubstitutions"])
    assert substitutions.pop("AuditBucket") == {"Ref": "AuditReportsBucket"}
    assert {v["Fn::GetAtt"][0] for v in substitutions.values()} == set(AUDIT_FUNCTIONS)
    assert props["Events"]["Weekly"]["Properties"]["Schedule"] == {"Ref": "AuditSchedule"}


def statements(logical_id: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for policy in TEMPLATE.resources[logical_id]["Properties"]["Policies"]:
        found += policy.get("Statement", [])
    return found


def test_no_audit_role_has_a_wildcard_action_or_writes_outside_its_prefix() -> None:
    for function in AUDIT_FUNCTIONS:
        for statement in statements(function):
            actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
            assert all("*" not in action for action in actions), function
            if any(a.startswith("s3:") for a in actions):
                assert statement["Resource"] != "*", function
    writes = {
        function: [
            s["Resource"]["Fn::Sub"]
            for s in statements(function)
            if "s3:PutObject" in (s["Action"] if isinstance(s["Action"], list) else [s["Action"]])
        ]
        for function in AUDIT_FUNCTIONS
    }
    assert writes["AuditPlanFunction"] == ["${AuditReportsBucket.Arn}/runs/*"]  # the run's items
    assert writes["AuditDiscoverFunction"] == ["${AuditReportsBucket.Arn}/runs/*"]
    assert writes["AuditReportFunction"] == ["${AuditReportsBucket.Arn}/reports/*"]


def test_the_reports_bucket_is_private_encrypted_and_expires_intermediate_results() -> None:
    bucket = TEMPLATE.resources["AuditReportsBucket"]["Properties"]
    assert all(bucket["PublicAccessBlockConfiguration"].values())
    assert bucket["BucketEncryption"]["ServerSideEncryptionConfiguration"][0]
    rules = {r["Prefix"]: r for r in bucket["LifecycleConfiguration"]["Rules"] if "Prefix" in r}
    assert rules["runs/"]["ExpirationInDays"] <= 7
    assert "AuditStateMachineArn" in TEMPLATE.body["Outputs"]
