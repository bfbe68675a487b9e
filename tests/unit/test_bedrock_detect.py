"""bedrock_throughput_idle, pure: no datapoints is no invocations, commitments are reported with their end,
the owner's opt-in alone allows a delete, and a throughput invoked again loses its mark."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from costguard.detect.bedrock import AUTO_DELETE_TAG, throughput_findings
from costguard.model import MARK_TAG_KEY, Finding, ProvisionedThroughput, Reason
from costguard.pricing import Price
from costguard.pricing.bedrock import parse_rates, unit_price

NOW = datetime(2026, 11, 20, 12, tzinfo=UTC)
WINDOW = timedelta(hours=24)
PRICE = Price(20.0, "test rates")
PT = ProvisionedThroughput(
    arn="arn:aws:bedrock:us-east-1:123456789012:provisioned-model/pt",
    name="pt",
    account="123456789012",
    region="us-east-1",
    model_arn="arn:aws:bedrock:us-east-1::foundation-model/amazon.titan-text-express-v1",
    foundation_model_arn="arn:aws:bedrock:us-east-1::foundation-model/amazon.titan-text-express-v1",
    model_units=3,
    status="InService",
    created=NOW - timedelta(days=3),
    tags={AUTO_DELETE_TAG: "true"},
)


def judge(pt: ProvisionedThroughput, invocations: float | None, price: Price | None = PRICE) -> list[Finding]:
    # Its series is found under its ARN (ListMetrics): silence is no use only then.
    return throughput_findings(pt, invocations, series=(pt.arn,), price=price, window=WINDOW, now=NOW)


def test_no_datapoints_at_all_is_idle_with_units_hourly_price_and_idle_cost() -> None:
    [finding] = judge(PT, None)
    assert finding.reason is Reason.BEDROCK_THROUGHPUT_IDLE
    assert (finding.hourly_usd, finding.cost_usd) == (60.0, 1440.0)
    assert finding.remediable
    assert "3 model units" in finding.summary and "$1,440.00" in finding.summary


def test_a_throughput_younger_than_the_window_or_invoked_is_not_idle() -> None:
    assert judge(replace(PT, created=NOW - timedelta(hours=5)), None) == []
    assert judge(PT, 12.0) == []


def test_not_opted_in_is_reported_only_and_says_how_to_opt_in() -> None:
    [finding] = judge(replace(PT, tags={}), 0.0)
    assert not finding.remediable
    assert AUTO_DELETE_TAG in (finding.report_note or "")


def test_a_committed_throughput_is_never_deletable_and_told_again_in_its_last_week() -> None:
    far = replace(PT, commitment="SixMonths", commitment_expires=NOW + timedelta(days=60))
    [finding] = judge(far, None)
    assert not finding.remediable and finding.repeat_scope is None
    assert "2027-01-19 12:00 UTC" in finding.summary
    [soon] = judge(replace(far, commitment_expires=NOW + timedelta(days=3)), None)
    assert soon.repeat_scope == "commitment-ends-soon"
    # Once its term is over it is a no-commitment throughput again: deletable when opted in.
    [over] = judge(replace(far, commitment_expires=NOW - timedelta(days=1)), None)
    assert over.remediable


def test_an_unknown_price_is_unknown_not_zero() -> None:
    [finding] = judge(PT, None, price=None)
    assert finding.hourly_usd is None and finding.cost_usd is None
    assert "does not know" in finding.summary


def test_a_marked_throughput_invoked_again_has_its_mark_cancelled() -> None:
    [finding] = judge(replace(PT, tags=PT.tags | {MARK_TAG_KEY: NOW.isoformat()}), 5.0)
    assert finding.cancels_mark and finding.reason is Reason.GPU_ACTIVE_AGAIN


def test_rates_are_your_own_first_and_otherwise_unknown() -> None:
    own = "amazon.titan-text-express-v1=20.5, anthropic.claude-v2@SixMonths=35"
    assert parse_rates(own)[("anthropic.claude-v2", "SixMonths")] == 35.0
    price = unit_price("amazon.titan-text-express-v1", None, "us-east-1", own)
    assert price is not None and price.usd_per_hour == 20.5
    assert unit_price("amazon.titan-text-express-v1", "OneMonth", "us-east-1", own) is None
    assert unit_price("meta.llama3-70b-instruct-v1:0", None, "us-east-1") is None
