"""The audit over an organization: Plan's items (accounts x regions), each item's steps in its account and its
S3 prefix, and the report's per-account and per-team totals, with failed items named."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from costguard.audit import store
from costguard.audit.holdings import Holdings
from costguard.audit.html import render_html
from costguard.audit.model import Subject
from costguard.audit.report import build_report, region_result, team_totals
from costguard.audit.steps import PlanInput, RegionOutcome, RegionTask, ReportInput
from costguard.audit.summary import summary_message
from costguard.aws import clients, organization
from costguard.aws.organization import Account
from costguard.flows import audit_discover, audit_metrics, audit_plan, audit_report
from costguard.model import ResourceKind
from costguard.settings import parse_settings

NOW = datetime(2026, 11, 20, 12, tzinfo=UTC)
HUB = "111111111111"
STATE_MACHINE = f"arn:aws:states:us-east-1:{HUB}:stateMachine:costguard-audit"


def step(**input_: Any) -> PlanInput:
    return PlanInput(execution="run-1", started=NOW, input=input_, state_machine=STATE_MACHINE)


class Directory:
    """organization.directory() with its answers given, counting the asks."""

    def __init__(self, accounts: list[Account]) -> None:
        self.accounts = accounts
        self.asked = 0

    def active(self) -> list[Account]:
        self.asked += 1
        return list(self.accounts)


@pytest.fixture
def directory(monkeypatch: pytest.MonkeyPatch) -> Directory:
    found = Directory(
        [Account(HUB, "platform"), Account("222222222222", "research"), Account("333333333333", "vision")]
    )
    monkeypatch.setattr(organization, "directory", lambda: found)
    return found


def pairs(planned: dict[str, Any]) -> list[tuple[str, str, str | None]]:
    return [(i["account"], i["region"], i["account_name"]) for i in planned["items"]]


def test_a_single_account_deployment_plans_the_hub_alone_without_asking_organizations(
    directory: Directory,
) -> None:
    settings = parse_settings(regions="us-east-1,eu-west-1", member_role_name="", home_account="")
    planned = audit_plan.plan(step(), settings, "us-east-1")
    # The hub's account from the state machine's ARN: no settings, no STS, no Organizations.
    assert pairs(planned) == [(HUB, "us-east-1", None), (HUB, "eu-west-1", None)]
    assert directory.asked == 0
    assert planned["run"] == "run-1" and planned["now"] == NOW.isoformat()
    # Named in the settings, else the function's own ARN's account.
    named = parse_settings(member_role_name="", home_account="444444444444")
    assert pairs(audit_plan.plan(step(), named, "eu-west-1")) == [("444444444444", "eu-west-1", None)]
    bare = PlanInput(execution="run-1", started=NOW)
    assert pairs(audit_plan.plan(bare, parse_settings(member_role_name=""), "us-east-1", "555555555555")) == [
        ("555555555555", "us-east-1", None)
    ]
    assert directory.asked == 0


def test_a_single_account_deployment_refuses_other_accounts() -> None:
    settings = parse_settings(member_role_name="", home_account=HUB)
    with pytest.raises(ValueError, match="single-account deployment"):
        audit_plan.plan(step(accounts=["222222222222"]), settings, "us-east-1")
    with pytest.raises(ValueError, match="account is unknown"):
        audit_plan.plan(
            PlanInput(execution="r", started=NOW), parse_settings(member_role_name=""), "us-east-1"
        )


def test_an_organization_plans_every_active_account_by_name(directory: Directory) -> None:
    settings = parse_settings(member_role_name="costguard-member", regions="us-east-1,us-west-2")
    planned = audit_plan.plan(step(), settings, "us-east-1")
    assert pairs(planned) == [
        (HUB, "us-east-1", "platform"),
        (HUB, "us-west-2", "platform"),
        ("222222222222", "us-east-1", "research"),
        ("222222222222", "us-west-2", "research"),
        ("333333333333", "us-east-1", "vision"),
        ("333333333333", "us-west-2", "vision"),
    ]
    assert planned["accounts"] == 3
    assert directory.asked == 1


def test_named_accounts_win_and_need_no_organizations_call(directory: Directory) -> None:
    settings = parse_settings(member_role_name="costguard-member", accounts="222222222222,333333333333")
    assert pairs(audit_plan.plan(step(), settings, "us-east-1")) == [
        ("222222222222", "us-east-1", None),
        ("333333333333", "us-east-1", None),
    ]
    # The execution's input wins over the settings, its regions too.
    planned = audit_plan.plan(step(accounts=["333333333333"], regions=["eu-west-1"]), settings, "us-east-1")
    assert pairs(planned) == [("333333333333", "eu-west-1", None)]
    assert directory.asked == 0
    with pytest.raises(ValueError, match="12 digits"):
        audit_plan.plan(step(accounts=["research"]), settings, "us-east-1")


def test_each_item_discovers_and_reads_in_its_account_under_its_own_prefix(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: dict[str, str | None] = {}
    written: dict[str, Any] = {}

    def discover(region: str, now: datetime) -> list[Subject]:
        seen["discover"] = clients.acting_account()
        return []

    def read_usage(region: str, subjects: Any, now: datetime, days: int) -> dict[str, Any]:
        seen["metrics"] = clients.acting_account()
        return {}

    def gather(region: str, now: datetime, rules: Any) -> Holdings:
        seen["gather"] = clients.acting_account()
        return Holdings()

    monkeypatch.setattr(audit_discover, "discover", discover)
    monkeypatch.setattr(audit_discover, "gather", gather)
    monkeypatch.setattr(audit_metrics, "read_usage", read_usage)
    monkeypatch.setattr(store, "put_json", lambda bucket, key, value: written.setdefault(key, value) and key)
    monkeypatch.setattr(store, "get_json", lambda bucket, key: written[key])
    settings = parse_settings(audit_bucket="reports", member_role_name="costguard-member")
    task = RegionTask(
        run="run-1", now=NOW, region="us-west-2", account="222222222222", account_name="research"
    )
    out = audit_discover.discover_region(task, settings)
    assert (out["account"], out["account_name"], out["region"]) == ("222222222222", "research", "us-west-2")
    audit_metrics.read_region_metrics(RegionTask.model_validate(out), settings)
    assert seen == {"discover": "222222222222", "gather": "222222222222", "metrics": "222222222222"}
    assert clients.acting_account() is None  # only inside the steps
    assert sorted(written) == [
        "runs/run-1/222222222222/us-west-2/holdings.json",
        "runs/run-1/222222222222/us-west-2/subjects.json",
        "runs/run-1/222222222222/us-west-2/usage.json",
    ]
    # An item of an execution started before accounts: the old prefix.
    legacy = RegionTask(run="run-0", now=NOW, region="us-east-1")
    audit_discover.discover_region(legacy, settings)
    assert "runs/run-0/us-east-1/subjects.json" in written


def subject(account: str, team: str | None, instance_type: str = "g5.12xlarge", count: int = 1) -> Subject:
    return Subject(
        kind=ResourceKind.EC2_INSTANCE,
        id=f"i-{abs(hash((account, team, instance_type))) % 16**17:017x}",
        account=account,
        region="us-east-1",
        instance_type=instance_type,
        instance_count=count,
        tags={"team": team} if team else {},
    )


def finding(account: str, team: str, saving: float) -> dict[str, Any]:
    return {
        "reason": "rightsize_idle",
        "resource": {
            "kind": "ec2_instance",
            "id": f"i-{account}",
            "name": None,
            "account": account,
            "region": "us-east-1",
            "team": team,
        },
        "current_type": "g5.12xlarge",
        "instance_count": 1,
        "current_market": "on-demand",
        "current_hourly_usd": 5.0,
        "recommended_type": None,
        "recommended_market": None,
        "recommended_hourly_usd": None,
        "monthly_cost_usd": saving,
        "monthly_saving_usd": saving,
        "confidence": "high",
        "risk": "low",
        "projected_gpu_p95_percent": None,
        "summary": "idle",
        "evidence": {},
        "alternatives": [],
        "chart": [],
    }


def result(
    account: str, name: str | None, region: str, subjects: list[Subject], savings: list[float]
) -> dict:  # type: ignore[type-arg]
    prices = {"g5.12xlarge": 5.0, "p4d.24xlarge": 20.0}
    teams = team_totals(subjects, prices, "team", 730)
    ok = region_result(
        region,
        [],
        [],
        audited=len(subjects),
        monthly_cost_usd=sum(t["monthly_cost_usd"] for t in teams.values()),
        team_tag="team",
        account=account,
        account_name=name,
        instances=sum(s.instance_count for s in subjects),
        teams=teams,
    )
    ok["findings"] = [finding(account, "vision", s) for s in savings]
    return ok


ACCESS_DENIED = json.dumps(
    {
        "errorType": "ClientError",
        "errorMessage": "An error occurred (AccessDenied) when calling the AssumeRole operation: denied",
    }
)


def org_report() -> dict[str, Any]:
    regions = [
        result(HUB, "platform", "us-east-1", [subject(HUB, "vision"), subject(HUB, None)], [100.0]),
        result(
            "222222222222", "research", "us-east-1", [subject("222222222222", "nlp", "p4d.24xlarge", 2)], []
        ),
        {
            "account": "222222222222",
            "account_name": "research",
            "region": "us-west-2",
            "status": "failed",
            "error": "ClientError",
            "cause": ACCESS_DENIED,
        },
        result("333333333333", "vision", "us-east-1", [subject("333333333333", "vision")], [250.0, 50.0]),
    ]
    return build_report(
        run="r1", generated_at=NOW, window_start=NOW - timedelta(days=14), window_end=NOW, regions=regions
    )


def test_team_totals_count_resources_instances_and_cost() -> None:
    teams = team_totals(
        [subject(HUB, "vision"), subject(HUB, "vision", "p4d.24xlarge", 2), subject(HUB, None, "x9.unknown")],
        {"g5.12xlarge": 5.0, "p4d.24xlarge": 20.0},
        "team",
        730,
    )
    assert teams == {
        # No price: not $0 known, and counted as unpriced.
        "(untagged)": {"resources": 1, "instances": 1, "monthly_cost_usd": 0.0, "unpriced": 1},
        "vision": {"resources": 2, "instances": 3, "monthly_cost_usd": round((5.0 + 40.0) * 730, 2)},
    }


def test_the_report_totals_each_account_and_each_team() -> None:
    report = org_report()
    accounts = {a["account"]: a for a in report["accounts"]}
    assert [a["account"] for a in report["accounts"]] == ["333333333333", HUB, "222222222222"]  # saving first
    assert accounts["333333333333"] | {"failed": []} == {
        "account": "333333333333",
        "name": "vision",
        "regions": ["us-east-1"],
        "resources": 1,
        "instances": 1,
        "monthly_cost_usd": round(5.0 * 730, 2),
        "findings": 2,
        "monthly_saving_usd": 300.0,
        "failed": [],
    }
    research = accounts["222222222222"]
    assert research["regions"] == ["us-east-1", "us-west-2"]
    assert (research["resources"], research["instances"]) == (1, 2)
    assert research["monthly_cost_usd"] == round(2 * 20.0 * 730, 2)
    [failed] = research["failed"]
    assert failed["region"] == "us-west-2"
    assert failed["message"].startswith("ClientError: An error occurred (AccessDenied)")
    totals = report["totals"]
    assert totals["accounts"] == 3
    assert totals["resources"] == 4 and totals["instances"] == 5
    assert totals["failed_regions"] == ["research (222222222222)/us-west-2"]
    assert totals["failed_items"] == 1
    assert totals["monthly_saving_usd"] == 400.0
    assert sum(a["monthly_cost_usd"] for a in report["accounts"]) == pytest.approx(totals["monthly_cost_usd"])
    [failure] = report["failures"]
    assert (failure["account"], failure["region"], failure["error"]) == (
        "222222222222",
        "us-west-2",
        "ClientError",
    )
    teams = report["by_team"]
    assert list(teams) == ["vision", "nlp", "(untagged)"]  # saving first, then cost
    assert teams["vision"] == {
        "resources": 2,
        "instances": 2,
        "monthly_cost_usd": round(2 * 5.0 * 730, 2),
        "findings": 3,
        "monthly_saving_usd": 400.0,
    }
    assert teams["nlp"]["findings"] == 0 and teams["nlp"]["instances"] == 2


def test_the_page_and_the_summary_show_the_accounts_teams_and_the_failure() -> None:
    report = org_report()
    page = render_html(report)
    assert page.count('<tr class="account') == 3
    assert '<tr class="account failed" data-account="222222222222">' in page
    assert page.count('<tr class="by-team">') == 3
    assert (
        "research (222222222222)/us-west-2: ClientError: An error occurred (AccessDenied) when calling the "
        "AssumeRole operation: denied" in page
    )
    assert 'id="total-accounts">3<' in page
    message = summary_message(report, None)
    text = json.dumps(message)
    assert "*By account*" in text and "research (222222222222)" in text and "1 failed" in text
    assert "*By team*" in text and "vision" in text
    assert "research (222222222222)/us-west-2: ClientError: An error occurred (AccessDenied)" in text
    assert message["blocks"][1]["text"]["text"].startswith("3 accounts: ")


def test_a_one_account_report_keeps_its_regions_and_shows_no_account_table() -> None:
    one = build_report(
        run="r1",
        generated_at=NOW,
        window_start=NOW - timedelta(days=14),
        window_end=NOW,
        regions=[
            result(HUB, None, "us-east-1", [subject(HUB, "vision")], [10.0]),
            {
                "account": HUB,
                "region": "eu-west-3",
                "status": "failed",
                "error": "States.Timeout",
                "cause": "late",
            },
        ],
    )
    assert one["totals"]["failed_regions"] == ["eu-west-3"]  # as before accounts
    [row] = one["accounts"]  # the JSON always has the table: one row
    assert row["account"] == HUB and row["regions"] == ["us-east-1", "eu-west-3"]
    page = render_html(one)
    assert 'id="accounts"' not in page and "<th>Account</th>" not in page
    assert "eu-west-3: States.Timeout: late" in page
    text = json.dumps(summary_message(one, None))
    assert "By account" not in text
    assert "eu-west-3: States.Timeout: late" in text


def test_the_report_step_names_a_failed_item_by_account(monkeypatch: pytest.MonkeyPatch) -> None:
    stored = {"runs/r1/111111111111/us-east-1/result.json": result(HUB, None, "us-east-1", [], [])}
    written: dict[str, Any] = {}
    monkeypatch.setattr(store, "get_json", lambda bucket, key: json.loads(json.dumps(stored[key])))
    monkeypatch.setattr(store, "put_json", lambda bucket, key, value: written.setdefault(key, value) and key)
    monkeypatch.setattr(store, "put_html", lambda bucket, key, text: key)
    monkeypatch.setattr(store, "put_csv", lambda bucket, key, text: key)
    monkeypatch.setattr(store, "get_json_if_present", lambda bucket, key: None)  # no previous report
    monkeypatch.setattr(store, "presigned_link", lambda bucket, key, hours: f"https://s3/{key}")
    step_ = ReportInput(
        run="r1",
        now=NOW,
        regions=[
            RegionOutcome(
                account=HUB,
                account_name="platform",
                region="us-east-1",
                status="ok",
                result_key="runs/r1/111111111111/us-east-1/result.json",
            ),
            RegionOutcome(
                account="222222222222",
                account_name="research",
                region="us-west-2",
                status="failed",
                error="ClientError",
                cause=ACCESS_DENIED,
            ),
        ],
    )
    out = audit_report.report(step_, parse_settings(audit_bucket="reports", slack_secret_id=""))
    [document] = [v for k, v in written.items() if k.endswith("report.json")]
    assert {a["account"]: a["name"] for a in document["accounts"]} == {
        HUB: "platform",
        "222222222222": "research",
    }
    assert out["totals"]["failed_regions"] == ["research (222222222222)/us-west-2"]
