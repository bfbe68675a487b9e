"""The audit's sections beside right-sizing, as pure rules: commitments from steady usage and the bundled plan
rates, orphaned volumes and training-job prefixes with their monthly cost, untagged GPU spend and its totals,
and Compute Optimizer's recommendations beside costguard's."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from costguard.audit.gather import old_job_prefixes
from costguard.audit.holdings import (
    Holdings,
    JobPrefix,
    Volume,
    commitments,
    optimizer_comparison,
    orphaned_prefixes,
    orphaned_volumes,
    region_sections,
    untagged,
)
from costguard.audit.holdings_html import holdings_html
from costguard.audit.holdings_report import holdings_sections, holdings_totals, untagged_section
from costguard.audit.model import AuditFinding, Subject
from costguard.audit.rules import parse_rules
from costguard.model import Reason, ResourceKind
from costguard.pricing import bundled_table
from costguard.pricing.holdings import (
    ebs_gb_month,
    s3_gb_month,
    savings_plan_discount,
    savings_plan_rate,
)

NOW = datetime(2026, 11, 20, 12, tzinfo=UTC)
WINDOW = 14 * 24.0
RULES = parse_rules()
HOURS = RULES.hours_per_month
EC2 = bundled_table()["ec2"]
GIB = 2**30


def ec2(
    id: str, instance_type: str, hours: float, *, spot: bool = False, tags: dict[str, str] | None = None
) -> Subject:
    return Subject(
        kind=ResourceKind.EC2_INSTANCE,
        id=id,
        account="123456789012",
        region="us-east-1",
        instance_type=instance_type,
        running_hours=hours,
        spot=spot,
        tags=tags or {},
    )


def candidates(subjects: list[Subject], covered: dict[str, float] | None = None, **kwargs: Any) -> list[dict]:
    prices = {s.instance_type: EC2[s.instance_type] for s in subjects}
    return commitments(
        subjects, prices, covered, window_hours=WINDOW, rules=RULES, rate=savings_plan_rate, **kwargs
    )


# -- commitment_candidate ------------------------------------------------------------------------------------


def test_steady_usage_is_a_candidate_saving_the_bundled_plan_rate() -> None:
    """Two g5.12xlarge up the whole window: 2 instances x (on-demand - 1-year Compute Savings Plan rate) x 730."""
    rows = candidates([ec2("i-1", "g5.12xlarge", 500), ec2("i-2", "g5.12xlarge", 400)])
    assert len(rows) == 1
    row = rows[0]
    rate = round(EC2["g5.12xlarge"] * (1 - savings_plan_discount("g5", "compute", "1yr")), 4)
    assert row["reason"] == Reason.COMMITMENT_CANDIDATE.value
    assert (row["plan"], row["term"], row["payment"]) == ("compute", "1yr", "no upfront")
    assert row["rate_usd_per_hour"] == rate
    assert row["average_instances"] == 2.0
    assert row["monthly_saving_usd"] == pytest.approx(2 * (EC2["g5.12xlarge"] - rate) * HOURS, abs=0.01)
    assert row["commitment_usd_per_hour"] == pytest.approx(2 * rate, abs=1e-4)
    # Every plan and term is priced beside the headline, the EC2 Instance plan saving more than Compute.
    options = {(o["plan"], o["term"]): o["monthly_saving_usd"] for o in row["options"]}
    assert set(options) == {
        ("compute", "1yr"),
        ("ec2_instance", "1yr"),
        ("compute", "3yr"),
        ("ec2_instance", "3yr"),
    }
    assert options[("ec2_instance", "1yr")] > options[("compute", "1yr")]
    assert row["resources"] == ["i-1", "i-2"]


def test_usage_under_the_share_of_the_window_spot_and_idle_instances_are_not_candidates() -> None:
    share = RULES.commitment.min_share
    subjects = [
        ec2("i-short", "p4d.24xlarge", share * WINDOW - 1),
        ec2("i-spot", "g6.xlarge", WINDOW, spot=True),
        ec2("i-idle", "g6e.12xlarge", WINDOW),
    ]
    assert candidates(subjects, exclude=frozenset({"i-idle"})) == []
    # Just at the share it counts, for the hours it ran.
    [row] = candidates([ec2("i-steady", "p4d.24xlarge", share * WINDOW)])
    assert row["average_instances"] == pytest.approx(share, abs=0.01)


def test_usage_already_covered_by_savings_plans_is_excluded() -> None:
    subjects = [ec2("i-1", "p5.48xlarge", WINDOW)]
    [whole] = candidates(subjects, covered={"p5": 0.0})
    [half] = candidates(subjects, covered={"p5": 0.5})
    assert half["covered_share"] == 0.5
    assert half["uncovered_instances"] == 0.5
    assert half["monthly_saving_usd"] == pytest.approx(whole["monthly_saving_usd"] / 2, abs=0.01)
    assert candidates(subjects, covered={"p5": 1.0}) == []
    # Cost Explorer did not answer, or reported no spend of the family (a hub that cannot see the account's
    # costs): nothing is taken as covered, and the row says coverage was not known.
    [unknown] = candidates(subjects, covered=None)
    [unseen] = candidates(subjects, covered={"g5": 0.3})
    assert unknown["monthly_saving_usd"] == unseen["monthly_saving_usd"] == whole["monthly_saving_usd"]
    assert unknown["coverage_known"] is unseen["coverage_known"] is False
    assert half["coverage_known"] is True
    assert unknown["summary"].endswith("Savings Plans coverage unknown: none taken as covered.")


def test_a_family_without_a_bundled_plan_rate_is_not_guessed() -> None:
    assert savings_plan_discount("g4ad", "compute", "1yr") is None
    assert candidates([ec2("i-1", "g4ad.xlarge", WINDOW)]) == []


# -- orphaned_storage ----------------------------------------------------------------------------------------


def accelerated(instance_type: str) -> bool:
    return instance_type.split(".")[0] in {"p4d", "g5", "p5"}


def volume(id: str, size: int, kind: str, days: float, tags: dict[str, str] | None = None) -> Volume:
    return Volume(id=id, volume_type=kind, size_gib=size, created=NOW - timedelta(days=days), tags=tags or {})


def test_volumes_a_tag_ties_to_a_gpu_instance_are_orphaned_with_their_monthly_cost() -> None:
    tag = RULES.storage.volume_type_tags[0]
    volumes = [
        volume("vol-1", 2000, "gp3", 80, {tag: "p4d.24xlarge"}),
        volume("vol-2", 500, "gp2", 40, {tag: "g5.12xlarge"}),
        volume("vol-new", 100, "gp3", 1, {tag: "p5.48xlarge"}),  # younger than min_age_days
        volume("vol-cpu", 30, "gp3", 90, {tag: "m5.large"}),  # not a GPU type
        volume("vol-bare", 50, "gp3", 90),  # nothing says where it came from
    ]
    rows, others = orphaned_volumes(
        volumes,
        region="us-east-1",
        account="123456789012",
        now=NOW,
        rules=RULES,
        accelerated=accelerated,
        gb_month=lambda kind: ebs_gb_month(kind, "us-east-1"),
    )
    assert {r["id"]: r["monthly_cost_usd"] for r in rows} == {
        "vol-1": pytest.approx(2000 * 0.08),
        "vol-2": pytest.approx(500 * 0.10),
    }
    assert all(r["reason"] == Reason.ORPHANED_STORAGE.value for r in rows)
    assert rows[0]["served"] == "p4d.24xlarge"
    assert others == {"volumes": 3, "size_gib": 180, "monthly_cost_usd": pytest.approx(180 * 0.08)}


def prefix(
    uri: str,
    job: str,
    ended: datetime,
    *,
    kind: str = "checkpoint",
    objects: int = 0,
    gib: dict[str, int] | None = None,
    newest: datetime | None = None,
    error: str | None = None,
) -> JobPrefix:
    """One job's prefix holding ``gib`` GiB per storage class."""
    return JobPrefix(
        uri=uri,
        kind=kind,
        jobs=(job,),
        ended=ended,
        objects=objects,
        bytes_by_class={c: n * GIB for c, n in (gib or {}).items()},
        newest=newest,
        error=error,
    )


def test_prefixes_of_old_jobs_nothing_wrote_to_since_are_orphaned() -> None:
    old = NOW - timedelta(days=60)
    recent = NOW - timedelta(days=2)
    prefixes = [
        prefix(
            "s3://ckpt/llama/", "llama", old, objects=3, gib={"STANDARD": 300, "GLACIER": 100}, newest=old
        ),
        # A later run writes there again: in use.
        prefix("s3://ckpt/shared/", "a", old, objects=1, gib={"STANDARD": 1}, newest=recent),
        prefix("s3://out/new/", "b", recent, kind="artifacts", objects=1, gib={"STANDARD": 1}, newest=recent),
        prefix("s3://out/emptied/", "c", old, kind="artifacts"),
        prefix("s3://other-account/x/", "d", old, kind="artifacts", error="AccessDenied"),
    ]
    rows = orphaned_prefixes(
        prefixes,
        region="us-east-1",
        account=None,
        now=NOW,
        rules=RULES,
        gb_month=lambda kind: s3_gb_month(kind, "us-east-1"),
    )
    by_id = {r["id"]: r for r in rows}
    assert set(by_id) == {"s3://ckpt/llama/", "s3://other-account/x/"}
    llama = by_id["s3://ckpt/llama/"]
    # Standard bytes priced at the S3 Standard rate; the Glacier bytes counted, not priced.
    assert llama["monthly_cost_usd"] == pytest.approx(300 * 0.023)
    assert (llama["size_gib"], llama["unpriced_gib"], llama["kind"]) == (400, 100, "s3_checkpoint")
    assert by_id["s3://other-account/x/"]["monthly_cost_usd"] is None
    assert "not listed (AccessDenied)" in by_id["s3://other-account/x/"]["summary"]


def test_each_prefix_is_listed_once_with_every_job_that_wrote_there() -> None:
    ended = NOW - timedelta(days=40)
    jobs = [
        {
            "TrainingJobName": "run-1",
            "TrainingEndTime": ended,
            "CheckpointConfig": {"S3Uri": "s3://ckpt/llama"},
            "OutputDataConfig": {"S3OutputPath": "s3://out/"},
        },
        {
            "TrainingJobName": "run-2",
            "TrainingEndTime": ended + timedelta(days=1),
            "CheckpointConfig": {"S3Uri": "s3://ckpt/llama/run-2/"},  # inside run-1's: one walk lists both
        },
        {
            "TrainingJobName": "run-3",
            "TrainingEndTime": NOW - timedelta(days=1),
            "CheckpointConfig": {"S3Uri": "s3://ckpt/x/"},
        },
    ]
    prefixes = old_job_prefixes(jobs, NOW - timedelta(days=30))
    assert [(p.uri, p.kind, p.jobs) for p in prefixes] == [
        ("s3://ckpt/llama/", "checkpoint", ("run-1", "run-2")),
        ("s3://out/run-1/", "artifacts", ("run-1",)),
    ]
    assert prefixes[0].ended == ended + timedelta(days=1)


# -- untagged_gpu_spend --------------------------------------------------------------------------------------


def test_untagged_spend_per_resource_per_missing_tag_and_per_account() -> None:
    subjects = [
        ec2("i-ok", "g5.xlarge", 10, tags={"team": "a", "project": "p", "owner": "o"}),
        ec2("i-noproject", "p4d.24xlarge", 10, tags={"team": "a", "owner": "o"}),
        ec2("i-bare", "g6.xlarge", 10, tags={"team": " "}),  # an empty value is no tag
    ]
    prices = {s.instance_type: EC2[s.instance_type] for s in subjects}
    rows = untagged(subjects, prices, ("team", "project", "owner"), hours_per_month=HOURS, team_tag="team")
    assert [r["id"] for r in rows] == ["i-noproject", "i-bare"]  # costliest first
    assert rows[1]["missing_tags"] == ["team", "project", "owner"]
    assert all(r["reason"] == Reason.UNTAGGED_GPU_SPEND.value for r in rows)
    p4d, g6 = EC2["p4d.24xlarge"] * HOURS, EC2["g6.xlarge"] * HOURS
    section = untagged_section(
        [
            {
                "status": "ok",
                "region": "us-east-1",
                "untagged": {"required_tags": ["team", "project", "owner"], "rows": rows},
            }
        ]
    )
    assert section["monthly_cost_usd"] == pytest.approx(p4d + g6, abs=0.01)
    assert section["by_missing_tag"] == {
        "team": {"resources": 1, "monthly_cost_usd": pytest.approx(g6, abs=0.01)},
        "project": {"resources": 2, "monthly_cost_usd": pytest.approx(p4d + g6, abs=0.01)},
        "owner": {"resources": 1, "monthly_cost_usd": pytest.approx(g6, abs=0.01)},
    }
    assert section["by_account"]["123456789012"]["resources"] == 2
    # No required tags: nothing is checked.
    assert untagged(subjects, prices, (), hours_per_month=HOURS, team_tag="team") == []


# -- Compute Optimizer alongside -----------------------------------------------------------------------------


def finding(subject: Subject, reason: Reason, target: str | None, hourly: float | None) -> AuditFinding:
    return AuditFinding(
        reason=reason,
        subject=subject,
        summary="",
        current_hourly_usd=EC2[subject.instance_type],
        recommended_type=target,
        recommended_hourly_usd=hourly,
        monthly_cost_usd=0.0,
        monthly_saving_usd=100.0,
        confidence="high",
    )


def recommendation(instance: str, finding: str, target: str, *, idle: bool = False) -> dict[str, Any]:
    return {
        "instanceArn": f"arn:aws:ec2:us-east-1:123456789012:instance/{instance}",
        "finding": finding,
        "idle": "True" if idle else "False",
        "recommendationOptions": [
            {"rank": 2, "instanceType": "x.large"},
            {
                "rank": 1,
                "instanceType": target,
                "savingsOpportunity": {"estimatedMonthlySavings": {"value": 42.0}},
            },
        ],
    }


def test_compute_optimizer_beside_costguard_agrees_or_says_where_it_disagrees() -> None:
    idle, small, kept, other, none = (ec2(f"i-{n}", "g5.12xlarge", WINDOW) for n in range(5))
    findings = [
        finding(idle, Reason.RIGHTSIZE_IDLE, None, None),
        finding(small, Reason.RIGHTSIZE_DOWNSIZE, "g5.2xlarge", EC2["g5.2xlarge"]),
        finding(other, Reason.RIGHTSIZE_DOWNSIZE, "g5.2xlarge", EC2["g5.2xlarge"]),
    ]
    recommendations = [
        recommendation(idle.id, "Overprovisioned", "g5.xlarge", idle=True),
        recommendation(small.id, "Overprovisioned", "g5.2xlarge"),
        recommendation(kept.id, "Overprovisioned", "g5.4xlarge"),
        recommendation(other.id, "Overprovisioned", "g5.4xlarge"),
    ]
    section = optimizer_comparison([idle, small, kept, other, none], findings, recommendations)
    verdicts = {r["id"]: (r["verdict"], r["why"]) for r in section["rows"]}
    assert verdicts[idle.id][0] == "agree"
    assert verdicts[small.id][0] == "agree"
    assert verdicts[kept.id] == (
        "disagree",
        "costguard: keep it as it is; Compute Optimizer: move to g5.4xlarge",
    )
    assert verdicts[other.id][0] == "same direction"
    assert section["without_recommendation"] == [none.id]
    kept_row = next(r for r in section["rows"] if r["id"] == kept.id)
    assert kept_row["compute_optimizer"] == {
        "finding": "Overprovisioned",
        "direction": "smaller",
        "recommended_type": "g5.4xlarge",  # the rank-1 option, whatever the order returned
        "monthly_saving_usd": 42.0,
    }


# -- the report's sections -----------------------------------------------------------------------------------


def test_the_report_sections_carry_their_totals_and_the_page_shows_them() -> None:
    tag = RULES.storage.volume_type_tags[0]
    subjects = [ec2("i-1", "g5.12xlarge", WINDOW, tags={"team": "a"})]
    prices = {"g5.12xlarge": EC2["g5.12xlarge"]}
    region = {"status": "ok", "region": "us-east-1", "account": "123456789012"} | region_sections(
        Holdings(volumes=(volume("vol-1", 1000, "gp3", 60, {tag: "g5.12xlarge"}),)),
        subjects,
        [],
        prices,
        region="us-east-1",
        account="123456789012",
        now=NOW,
        window_hours=WINDOW,
        rules=RULES,
        coverage=(None, None),
        recommendations=([recommendation("i-1", "Overprovisioned", "g5.4xlarge")], None),
        required_tags=("team", "project"),
        team_tag="team",
        accelerated=accelerated,
    )
    failed = {"status": "failed", "region": "eu-west-1"}
    sections = holdings_sections([region, failed])
    totals = holdings_totals(sections)
    saving = candidates(subjects)[0]["monthly_saving_usd"]
    assert totals == {
        "commitment_monthly_saving_usd": saving,
        "orphaned_storage_monthly_cost_usd": 80.0,
        "untagged_monthly_cost_usd": pytest.approx(EC2["g5.12xlarge"] * HOURS, abs=0.01),
        "compute_optimizer_disagreements": 1,
    }
    page = holdings_html(sections)
    for anchor in ('id="commitments"', 'id="orphaned-storage"', 'id="untagged"', 'id="compute-optimizer"'):
        assert anchor in page
    assert f"${saving:,.2f}" in page
    assert '<span id="orphaned-cost">$80.00</span>' in page
    assert 'data-verdict="disagree"' in page


def test_a_region_leaves_out_of_commitments_what_it_would_stop_and_says_what_it_could_not_read() -> None:
    steady, idle = ec2("i-1", "g5.12xlarge", WINDOW), ec2("i-2", "g5.12xlarge", WINDOW)
    sections = region_sections(
        Holdings(),
        [steady, idle],
        [finding(idle, Reason.RIGHTSIZE_IDLE, None, None)],
        {"g5.12xlarge": EC2["g5.12xlarge"]},
        region="us-east-1",
        account="123456789012",
        now=NOW,
        window_hours=WINDOW,
        rules=RULES,
        coverage=(None, "Cost Explorer did not answer"),
        recommendations=([], "not opted in"),
        required_tags=(),
        team_tag="team",
        accelerated=accelerated,
    )
    [row] = sections["commitments"]["rows"]
    assert row["resources"] == ["i-1"]
    assert sections["commitments"]["coverage_note"] == "Cost Explorer did not answer"
    assert sections["compute_optimizer"]["unavailable"] == "not opted in"
    assert sections["orphaned_storage"]["rows"] == []


def test_the_slack_summary_names_the_sections_with_something_to_say() -> None:
    from costguard.audit.summary import holdings_line

    line = holdings_line(
        {
            "commitment_monthly_saving_usd": 1234.5,
            "orphaned_storage_monthly_cost_usd": 0.0,
            "untagged_monthly_cost_usd": 99.0,
            "compute_optimizer_disagreements": 2,
        }
    )
    assert line == (
        "*Also:* Savings Plans *$1,234.50/mo* (estimate); untagged GPU spend $99.00/mo; "
        "Compute Optimizer disagrees on 2"
    )
    assert holdings_line({"monthly_saving_usd": 5.0}) is None  # a report made before the sections


def test_a_disagreement_quotes_each_side_with_its_own_target() -> None:
    from costguard.audit.holdings import _agreement

    verdict, words = _agreement(("smaller", "g5.2xlarge"), ("other", "g5.4xlarge"))
    assert verdict == "disagree"
    assert words == "costguard: move to g5.2xlarge; Compute Optimizer: move to g5.4xlarge"
