"""`costguard doctor` and `costguard audit --live` against the embedded AWS seeded with the demo world: what they
say of it (its nlp-g6-no-agent instance publishes no GPU metrics), and that every call they make is within the
read-only policy each prints, which grants no write."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.client import BaseClient

from costguard.aws import clients, quotas
from costguard.cli import main
from costguard.local.holdings import HoldingsResponder, seed_holdings
from costguard.local.responder import Responder
from costguard.local.stack import LocalStack
from costguard.local.world import World
from costguard.ops.doctor import DOCTOR_POLICY
from costguard.ops.live_audit import LIVE_AUDIT_POLICY
from costguard.permissions import is_read

NO_AGENT = "i-0a1f00000000000a5"  # nlp-g6-no-agent: gpu_metrics pattern none
BUDGETS_FUNCTION = "costguard-BudgetsFunction-AbC123dEf456"
# Operations IAM authorizes under another action's name; service prefixes IAM spells otherwise.
ACTIONS = {
    "budgets:DescribeBudgets": "budgets:ViewBudget",
    "budgets:DescribeNotificationsForBudget": "budgets:ViewBudget",
    "budgets:DescribeSubscribersForNotification": "budgets:ViewBudget",
    "s3:ListObjectsV2": "s3:ListBucket",
}
PREFIXES = {"service-quotas": "servicequotas"}


def actions_of(policy: dict[str, Any]) -> set[str]:
    """Every action the policy allows: the reads on any resource, and the Slack secret's read on the stack's own
    secret only (a condition on the tag CloudFormation writes)."""
    actions: set[str] = set()
    for statement in policy["Statement"]:
        assert statement["Effect"] == "Allow"
        if statement["Resource"] != "*":
            assert statement["Action"] == ["secretsmanager:GetSecretValue"]
            condition = statement["Condition"]["StringLike"]
            assert condition == {"secretsmanager:ResourceTag/aws:cloudformation:stack-name": "costguard*"}
        actions |= set(statement["Action"])
    return actions


def test_the_doctor_reads_no_secret_but_its_stacks() -> None:
    """Issue 41: a read-only check does not get GetSecretValue on every secret of the account."""
    wide = [s for s in DOCTOR_POLICY["Statement"] if s["Resource"] == "*"]
    assert all("secretsmanager:GetSecretValue" not in s["Action"] for s in wide)
    assert "secretsmanager:GetSecretValue" in actions_of(DOCTOR_POLICY)


@pytest.fixture
def called(monkeypatch: pytest.MonkeyPatch) -> Iterator[set[str]]:
    """The IAM action of every botocore call made from here on (the stack's seeding is done by then)."""
    recorded: set[str] = set()
    make_api_call = BaseClient._make_api_call  # type: ignore[attr-defined]

    def recording(self: Any, operation: str, params: dict[str, Any]) -> Any:
        service = self.meta.service_model.service_name
        name = f"{PREFIXES.get(service, service)}:{operation}"
        recorded.add(ACTIONS.get(name, name))
        return make_api_call(self, operation, params)

    monkeypatch.setattr(BaseClient, "_make_api_call", recording)
    yield recorded


def deploy(stack: LocalStack, gpu_alarms: str = "on", **parameters: str) -> str:
    """What `sam deploy` leaves that the doctor reads: the stack's parameters (``parameters`` besides) and outputs
    (CloudFormation), its cost-alerts topic subscribed by its budgets function, and one budget alerting that topic."""
    account, region = stack.world.account, stack.world.region
    function_arn = f"arn:aws:lambda:{region}:{account}:function:{BUDGETS_FUNCTION}"
    values = {"Mode": "notify", "GpuAlarms": gpu_alarms, "SlackWebhookHosts": ""} | parameters
    template = {
        "Parameters": {name: {"Type": "String"} for name in values},
        "Resources": {
            "CostAlertsTopic": {
                "Type": "AWS::SNS::Topic",
                "Properties": {"TopicName": "costguard-cost-alerts"},
            }
        },
        "Outputs": {
            "CostAlertsTopicArn": {"Value": {"Ref": "CostAlertsTopic"}},
            "SlackWebhookSecretArn": {"Value": stack.urls["SlackWebhookSecret"]},
            "BudgetsFunctionName": {"Value": BUDGETS_FUNCTION},
        },
    }
    cloudformation: Any = clients.client("cloudformation", region)
    cloudformation.create_stack(
        StackName="costguard",
        TemplateBody=json.dumps(template),
        Parameters=[{"ParameterKey": name, "ParameterValue": value} for name, value in values.items()],
    )
    topic = f"arn:aws:sns:{region}:{account}:costguard-cost-alerts"
    clients.client("sns", region).subscribe(TopicArn=topic, Protocol="lambda", Endpoint=function_arn)
    clients.client("budgets", "us-east-1").create_notification(
        AccountId=account,
        BudgetName="ml-research-gpu",
        Notification={
            "NotificationType": "ACTUAL",
            "ComparisonOperator": "GREATER_THAN",
            "Threshold": 100.0,
            "ThresholdType": "PERCENTAGE",
        },
        Subscribers=[{"SubscriptionType": "SNS", "Address": topic}],
    )
    answer_what_moto_lacks(account)
    return topic


def answer_what_moto_lacks(account: str) -> None:
    """moto has no DescribeSubscribersForNotification (answered from its Budgets backend) and lists no CloudWatch
    quota: both answered on the factory's clients, their requests still checked against the service models."""
    from moto.budgets.models import budgets_backends

    def subscribers(params: dict[str, Any]) -> dict[str, Any]:
        budget = budgets_backends[account]["aws"].budgets[params["AccountId"]][params["BudgetName"]]
        wanted = params["Notification"]
        for notification in budget.notifications:
            if all(notification.details.get(k) == v for k, v in wanted.items() if k != "NotificationState"):
                return {"Subscribers": notification.subscribers}
        return {"Subscribers": []}

    Responder({"DescribeSubscribersForNotification": subscribers}, "https://budgets.amazonaws.com").install(
        clients.client("budgets", "us-east-1")
    )
    quota = {"ServiceCode": quotas.SERVICE_CODE, "QuotaName": quotas.QUOTA_NAME, "Value": 200.0}
    Responder(
        {"ListServiceQuotas": lambda params: {"Quotas": [quota]}}, "https://servicequotas.amazonaws.com"
    ).install(clients.client("service-quotas", "us-east-1"))


@pytest.fixture
def deployed(world: World, sleeps: list[float]) -> Iterator[LocalStack]:
    with LocalStack(world) as stack:
        deploy(stack)
        yield stack


def test_doctor_names_the_instance_without_the_agent_and_calls_only_reads(
    deployed: LocalStack, called: set[str], capsys: pytest.CaptureFixture[str]
) -> None:
    called.clear()
    assert main(["doctor", "--region", "us-east-1", "--json"]) == 1  # something to fix
    report = json.loads(capsys.readouterr().out)
    checks = {(c["area"], c["subject"].split(" (")[0]): c for c in report["checks"]}

    missing = checks[("GPU metrics", f"instance {NO_AGENT} nlp-g6-no-agent")]
    assert missing["status"] == "fix"
    assert "publishes no nvidia_smi_utilization_gpu series with an InstanceId dimension" in missing["says"]
    assert "nvidia_gpu" in missing["fix"] and "append_dimensions" in missing["fix"]
    assert "InstanceId" in missing["fix"]
    # Deployed as above, the stack lacks nothing: what is to fix is the world's GPU metrics.
    assert {c["area"] for c in report["checks"] if c["status"] in ("fix", "unknown")} == {"GPU metrics"}
    assert checks[("GPU metrics", "notebook dana-scratch")]["status"] == "ok"
    assert checks[("GPU metrics", "training job bert-pretrain-hung")]["status"] == "ok"

    assert checks[("Stack", "costguard")]["status"] == "ok"
    topic = next(c for c in report["checks"] if c["subject"].startswith("topic "))
    assert topic["status"] == "ok" and BUDGETS_FUNCTION in topic["says"]
    assert checks[("Budget alerts", "budget ml-research-gpu")]["status"] == "ok"
    assert "ACTUAL > 100%" in checks[("Budget alerts", "budget ml-research-gpu")]["says"]
    assert checks[("Budget alerts", "budget gpu-monthly")]["status"] == "note"
    slack = checks[("Slack", "the Slack secret")]
    assert slack["status"] == "ok" and "webhook" in slack["says"]
    assert "127.0.0.1" not in json.dumps(report), "the secret's URL is never printed"
    alarms = checks[("GPU-idle alarms", "GpuAlarms")]
    assert alarms["status"] == "ok" and "against a quota of 200 (applied to the account)" in alarms["says"]

    sweep = {(line["reason"], line["resource"].split()[1]) for line in report["sweep"]}
    assert ("gpu_metrics_missing", NO_AGENT) in sweep
    assert ("gpu_idle", "i-0a1f00000000000a1") in sweep
    assert ("job_stalled", "bert-pretrain-hung") in sweep

    policy = actions_of(DOCTOR_POLICY)
    assert all(is_read(action) for action in policy), "the doctor's policy grants no write"
    assert called <= policy, f"calls outside the policy: {sorted(called - policy)}"
    assert {"cloudformation:DescribeStacks", "budgets:ViewBudget", "secretsmanager:GetSecretValue"} <= called
    assert "servicequotas:ListServiceQuotas" in called
    assert report["api_calls"]["cloudwatch:ListMetrics"] == 2  # the agent's GPU series once, the jobs' once


def test_doctor_tells_what_the_deployed_reason_modes_and_scope_would_stop(
    world: World, sleeps: list[float], called: set[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """One reason widened to remediate and one team kept out, as deployed: a sentence each, and the first sweep
    decided as the stack would (the idle instance of the team out of scope reported, not marked)."""
    with LocalStack(world) as stack:
        deploy(
            stack,
            ReasonModes="gpu_idle=remediate,job_stalled=remediate",
            RemediateScope="team!=ml-research",
        )
        called.clear()
        assert main(["doctor", "--region", "us-east-1", "--json"]) == 1  # the no-agent instance, as above
        report = json.loads(capsys.readouterr().out)
        assert main(["doctor", "--region", "us-east-1"]) == 1
        text = capsys.readouterr().out
    checks = {c["subject"]: c for c in report["checks"] if c["area"] == "Remediation"}
    modes, scope = checks["ReasonModes"], checks["RemediateScope"]
    assert modes["status"] == scope["status"] == "ok"
    assert modes["says"].startswith("Mode=notify with ReasonModes=gpu_idle=remediate,job_stalled=remediate: ")
    assert (
        "gpu_idle stops idle GPU instances; job_stalled stops stalled training jobs; reported only: "
        in (modes["says"])
    )
    assert "notebook_idle" in modes["says"].split("reported only: ")[1]
    assert report["acting_reasons"] == ["gpu_idle", "job_stalled"]
    # Out of scope by the rule, and which of the account's resources that leaves out: research-p4d-forgotten,
    # research-p4d-one-busy-gpu and the notebooks dana-scratch and li-finetune-lab.
    assert scope["says"] == (
        "team!=ml-research: resources tagged team=ml-research are out of scope, reported only and never stopped; "
        f"of the {scope['says'].split('of the ')[1].split()[0]} GPU resources read, 4 are: team=ml-research (4)"
    )
    sweep = {(line["reason"], line["resource"].split()[1]): line["action"] for line in report["sweep"]}
    outside = "team=ml-research is outside RemediateScope (team!=ml-research)"
    assert sweep[("gpu_idle", "i-0a1f00000000000a1")] == f"would mark ({outside}: reported, not done)"
    assert sweep[("gpu_idle", "i-0a1f00000000000d1")] == "mark"  # team forecasting: in scope
    assert sweep[("job_stalled", "bert-pretrain-hung")] == "mark"
    assert (
        sweep[("notebook_idle", "dana-scratch")]
        == "would mark (notebook_idle follows Mode (notify): reported, not done)"
    )
    assert (
        "notify mode, but ReasonModes puts gpu_idle, job_stalled in remediate: those mark, then stop" in text
    )
    assert "  OK       RemediateScope: team!=ml-research: resources tagged team=ml-research" in text
    policy = actions_of(DOCTOR_POLICY)
    assert called <= policy, f"calls outside the policy: {sorted(called - policy)}"


def test_doctor_reports_reason_modes_and_scope_that_do_not_read_with_the_fix(
    world: World, sleeps: list[float], capsys: pytest.CaptureFixture[str]
) -> None:
    with LocalStack(world) as stack:
        deploy(stack, ReasonModes="gpu_idel=remediate", RemediateScope="team")
        assert main(["doctor", "--region", "us-east-1", "--json"]) == 1
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    report = json.loads(out)
    checks = {c["subject"]: c for c in report["checks"] if c["area"] == "Remediation"}
    modes, scope = checks["ReasonModes"], checks["RemediateScope"]
    assert modes["status"] == scope["status"] == "fix"
    assert modes["says"].startswith("'gpu_idel=remediate' does not read ('gpu_idel' is not a reason code")
    assert "refuses to start" in modes["says"]
    assert 'ReasonModes="gpu_idle=remediate,job_stalled=remediate"' in modes["fix"]
    assert "samconfig.toml" in modes["fix"] and "sam deploy" in modes["fix"]
    assert scope["says"].startswith("'team' does not read (")
    assert 'RemediateScope="team!=research"' in scope["fix"]
    # The functions would not start: no sweep is decided as if they did.
    assert report["sweep"].startswith("not run: the stack's functions refuse to start with its settings")
    assert "COSTGUARD_REASON_MODES" in report["sweep"]


def test_audit_live_writes_the_report_says_what_lacks_metrics_and_calls_only_reads(
    world: World,
    sleeps: list[float],
    called: set[str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    with LocalStack(world) as stack:
        seed_holdings(world)
        HoldingsResponder(world).install()
        called.clear()
        assert stack.world.account == "123456789012"
        assert main(["audit", "--live", "--out", str(tmp_path)]) == 0
    out, err = capsys.readouterr()
    assert (
        "costguard audit --live: us-east-1: listing GPU and accelerator resources" in err
    )  # progress, on stderr
    assert "reading 14 days of their metrics" in err
    report = json.loads((tmp_path / "report.json").read_text())
    assert (tmp_path / "report.html").read_text().startswith("<!DOCTYPE html>")
    assert report["totals"]["failed_regions"] == []
    assert report["accounts"][0]["account"] == "123456789012"
    found = {(f["resource"]["name"], f["reason"]) for f in report["findings"]}
    assert ("research-g6e-forgotten", "rightsize_idle") in found
    [silent] = [s for s in report["skipped"] if s["name"] == "nlp-g6-no-agent"]
    assert silent["why"].startswith("too little GPU data (0 h observed")
    assert "no GPU metrics: ec2_instance nlp-g6-no-agent (g6.xlarge)" in out
    assert "nvidia_gpu section and append_dimensions InstanceId" in out
    assert f"wrote {tmp_path / 'report.json'}" in out

    policy = actions_of(LIVE_AUDIT_POLICY)
    assert all(is_read(action) for action in policy), "the live audit's policy grants no write"
    assert called <= policy, f"calls outside the policy: {sorted(called - policy)}"
    assert {"ce:GetSavingsPlansCoverage", "compute-optimizer:GetEC2InstanceRecommendations"} <= called


@pytest.mark.parametrize(
    ("command", "policy"), [(["doctor"], DOCTOR_POLICY), (["audit", "--live"], LIVE_AUDIT_POLICY)]
)
def test_print_policy_prints_the_documented_policy(
    command: list[str], policy: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*command, "--print-policy"]) == 0
    assert json.loads(capsys.readouterr().out) == policy
