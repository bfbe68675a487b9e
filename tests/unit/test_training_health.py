"""The training-health detectors (detect/training_health.py): a diverged run and a stale checkpoint, pure."""

from __future__ import annotations

import math
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from costguard.detect.training_cadence import added_datapoints
from costguard.detect.training_health import (
    CheckpointSeen,
    checkpoint_due,
    checkpoint_location,
    diverged_finding,
    divergence,
    loss_metrics,
    marked_for_divergence,
    metric_names,
    recovered,
    recovered_finding,
    remaining_seconds,
    split_s3_uri,
    stale_checkpoint_finding,
)
from costguard.events.sagemaker import TrainingJobDetail
from costguard.model import MARK_TAG_KEY, Action, Reason, mark_text
from costguard.policy import Policy, decide
from costguard.pricing import Price, bundled_table

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
WINDOW = timedelta(minutes=60)
TOLERANCE, SHARE = 0.01, 0.5
TYPE = "ml.g5.12xlarge"
PRICE = Price(bundled_table()["sagemaker"][TYPE], "bundled")
ACCOUNT, REGION = "123456789012", "us-east-1"


def job(
    *,
    metrics: tuple[str, ...] = ("train:loss",),
    started: datetime = NOW - timedelta(hours=4),
    tags: dict[str, str] | None = None,
    max_runtime: int | None = 24 * 3600,
    count: int = 2,
    spot: bool = False,
    checkpoint: str | None = None,
) -> TrainingJobDetail:
    raw: dict[str, Any] = {
        "TrainingJobName": "llm-sft",
        "TrainingJobArn": f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:training-job/llm-sft",
        "TrainingJobStatus": "InProgress",
        "AlgorithmSpecification": {
            "TrainingImage": "image",
            "MetricDefinitions": [{"Name": m, "Regex": f"{m}=(\\S+)"} for m in metrics],
        },
        "ResourceConfig": {"InstanceType": TYPE, "InstanceCount": count},
        "StoppingCondition": {"MaxRuntimeInSeconds": max_runtime} if max_runtime else {},
        "EnableManagedSpotTraining": spot,
        "TrainingStartTime": started.isoformat(),
        "Tags": tags or {},
    }
    if checkpoint:
        raw["CheckpointConfig"] = {"S3Uri": checkpoint}
    return TrainingJobDetail.model_validate(raw)


def every(minutes: int, values: list[float], *, end: datetime = NOW) -> list[tuple[datetime, float]]:
    """``values`` read every ``minutes``, the last at ``end``."""
    step = timedelta(minutes=minutes)
    return [(end - step * (len(values) - 1 - n), v) for n, v in enumerate(values)]


def judge(detail: TrainingJobDetail, series: dict[str, list[tuple[datetime, float]]]) -> Any:
    return divergence(detail, series, now=NOW, window=WINDOW, tolerance=TOLERANCE, share=SHARE)


def healthy_curve(hours: float = 4, step: int = 5) -> list[tuple[datetime, float]]:
    n = int(hours * 60 / step)
    return every(step, [2.0 / (1 + (k * step) / 60) for k in range(n + 1)])


def learning() -> list[tuple[datetime, float]]:
    """Two hours of a loss falling, ending before the last hour's window."""
    return every(10, [2.0 - 0.1 * k for k in range(12)], end=NOW - timedelta(minutes=70))


# --- training_diverged ---------------------------------------------------------------------------


def test_a_healthy_falling_loss_is_not_diverged() -> None:
    assert judge(job(), {"train:loss": healthy_curve()}) is None


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_a_nan_or_infinite_reading_in_the_window_is_diverged(bad: float) -> None:
    curve = healthy_curve()
    curve[-2] = (curve[-2][0], bad)
    found = judge(job(), {"train:loss": curve})
    assert found is not None and found.kind == "non_finite"
    assert found.metric == "train:loss"
    assert any(not math.isfinite(v) for v in found.recent)


def test_a_nan_before_the_window_is_history_not_divergence() -> None:
    curve = healthy_curve()
    curve[5] = (curve[5][0], math.nan)  # three and a half hours ago, then it recovered
    assert judge(job(), {"train:loss": curve}) is None


def test_a_nan_in_any_defined_metric_counts_not_only_the_loss() -> None:
    detail = job(metrics=("train:loss", "train:accuracy"))
    accuracy = every(5, [0.5, 0.6, math.nan])
    found = judge(detail, {"train:loss": healthy_curve(), "train:accuracy": accuracy})
    assert found is not None and (found.kind, found.metric) == ("non_finite", "train:accuracy")


def test_a_loss_rising_steadily_over_the_window_is_diverged() -> None:
    rising = every(10, [0.9, 0.95, 0.97, 1.02, 1.1, 1.2, 1.4])  # the last 60 minutes, six steps up
    found = judge(job(), {"train:loss": learning() + rising})
    assert found is not None and found.kind == "rising"
    assert found.recent[-1] == 1.4
    assert "rose in 6 of 6 steps" in found.why


def test_a_noisy_loss_with_a_few_rising_steps_is_not_diverged() -> None:
    noisy = every(10, [1.0, 1.05, 0.98, 1.03, 0.97, 1.02, 0.96])  # up, down, up, down: half the steps
    assert judge(job(), {"train:loss": learning() + noisy}) is None


def test_a_rise_within_the_tolerance_is_not_diverged() -> None:
    creeping = every(10, [1.0, 1.001, 1.002, 1.003, 1.004, 1.005, 1.006])  # +0.6% < 1%
    assert judge(job(), {"train:loss": creeping}) is None


def test_too_few_readings_say_nothing_about_a_trend() -> None:
    assert judge(job(), {"train:loss": every(20, [1.0, 1.5, 2.0])}) is None


def test_a_rising_metric_that_is_not_a_loss_is_not_judged_for_a_trend() -> None:
    detail = job(metrics=("train:loss", "train:accuracy"))
    accuracy = every(10, [0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8])  # rising accuracy is good news
    assert judge(detail, {"train:loss": healthy_curve(), "train:accuracy": accuracy}) is None


def test_the_loss_metric_tag_picks_the_loss() -> None:
    detail = job(metrics=("objective", "train:loss"), tags={"costguard:loss-metric": "objective"})
    assert loss_metrics(detail) == ["objective"]
    rising = every(10, [1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6])
    found = judge(detail, {"objective": rising, "train:loss": healthy_curve()})
    assert found is not None and (found.kind, found.metric) == ("rising", "objective")


def test_a_loss_flat_over_the_last_share_of_the_run_is_a_plateau() -> None:
    # Four hours: it learned in the first two, then stayed within 0.5% of its best for the last two (50%).
    learned = every(10, [2.0 - 0.08 * k for k in range(12)], end=NOW - timedelta(minutes=130))
    flat = every(10, [1.12, 1.125, 1.121, 1.123, 1.122, 1.124, 1.121, 1.122, 1.123, 1.121, 1.122, 1.125])
    found = judge(job(), {"train:loss": learned + flat})
    assert found is not None and found.kind == "plateau"
    assert "has not improved by more than 1.0% in the last 2.0h (50% of the run)" in found.why


def test_a_loss_still_improving_beyond_the_tolerance_is_no_plateau() -> None:
    learned = every(10, [2.0 - 0.08 * k for k in range(12)], end=NOW - timedelta(minutes=130))
    slower = every(10, [1.12 - 0.005 * k for k in range(12)])  # 5% better over the last two hours
    assert judge(job(), {"train:loss": learned + slower}) is None


def test_a_young_run_is_not_judged_for_a_plateau() -> None:
    # 90 minutes in: half the run is 45 minutes, under the 60-minute window.
    young = job(started=NOW - timedelta(minutes=90))
    flat = every(5, [1.2] * 18)
    assert judge(young, {"train:loss": flat}) is None


def test_a_job_without_metric_definitions_is_never_judged() -> None:
    detail = job(metrics=())
    assert metric_names(detail) == [] and loss_metrics(detail) == []
    assert judge(detail, {}) is None


def test_the_rest_of_the_run_is_what_is_left_of_max_runtime_times_count_times_price() -> None:
    detail = job(started=NOW - timedelta(hours=3), max_runtime=24 * 3600, count=2)
    found = judge(detail, {"train:loss": every(5, [1.0, math.nan])})
    finding = diverged_finding(
        detail, found, account=ACCOUNT, region=REGION, price=PRICE, now=NOW, observed_at=NOW
    )
    assert remaining_seconds(detail, NOW) == 21 * 3600
    assert finding.reason is Reason.TRAINING_DIVERGED
    assert finding.evidence["rest_of_run_usd"] == round(21 * 2 * PRICE.usd_per_hour, 2) == 297.78
    assert finding.hourly_usd == round(2 * PRICE.usd_per_hour, 4)
    assert finding.cost_usd is None  # nothing is claimed as spent: the figure is what is still to come
    assert "$297.78" in finding.summary
    assert finding.evidence["recent_values"] == ["1", "NaN"]


def test_only_a_job_tagged_to_allow_it_is_remediable() -> None:
    series = {"train:loss": every(5, [1.0, math.nan])}

    def remediable(tags: dict[str, str]) -> bool:
        detail = job(tags=tags)
        found = judge(detail, series)
        finding = diverged_finding(
            detail, found, account=ACCOUNT, region=REGION, price=PRICE, now=NOW, observed_at=NOW
        )
        return finding.remediable

    assert remediable({"costguard:stop-on-divergence": "true"})
    assert remediable({"costguard:stop-on-divergence": "TRUE"})
    assert not remediable({"costguard:stop-on-divergence": "yes please"})
    assert not remediable({})


def test_without_a_max_runtime_or_a_price_the_rest_of_the_run_is_unknown_never_zero() -> None:
    series = {"train:loss": every(5, [1.0, math.nan])}
    unbounded = job(max_runtime=None)
    finding = diverged_finding(
        unbounded,
        judge(unbounded, series),
        account=ACCOUNT,
        region=REGION,
        price=PRICE,
        now=NOW,
        observed_at=NOW,
    )
    assert finding.evidence["rest_of_run_usd"] is None
    assert "unknown amount" in finding.summary
    priced_not = diverged_finding(
        job(), judge(job(), series), account=ACCOUNT, region=REGION, price=None, now=NOW, observed_at=NOW
    )
    assert priced_not.evidence["rest_of_run_usd"] is None and priced_not.hourly_usd is None


def test_past_its_max_runtime_nothing_is_left_to_spend() -> None:
    assert remaining_seconds(job(started=NOW - timedelta(hours=30)), NOW) == 0


DIVERGED_MARK = {MARK_TAG_KEY: mark_text(NOW - timedelta(minutes=10), "training_diverged")}


def test_only_a_mark_made_for_a_diverged_run_is_a_divergence_mark() -> None:
    assert marked_for_divergence(job(tags=DIVERGED_MARK))
    assert not marked_for_divergence(job(tags={MARK_TAG_KEY: mark_text(NOW, "job_cost_ceiling")}))
    assert not marked_for_divergence(job(tags={MARK_TAG_KEY: mark_text(NOW)}))  # an idle mark
    assert not marked_for_divergence(job())


def test_a_loss_falling_again_through_the_window_is_a_recovery() -> None:
    detail = job(tags=DIVERGED_MARK)
    curve = {"train:loss": healthy_curve()}
    assert judge(detail, curve) is None
    assert recovered(detail, curve, now=NOW, window=WINDOW)


def test_a_window_without_readings_proves_no_recovery() -> None:
    """A run gone NaN may publish nothing at all (CloudWatch refuses NaN): silence keeps the mark."""
    detail = job(tags=DIVERGED_MARK)
    for quiet in ({}, {"train:loss": learning()}, {"train:loss": every(20, [1.0, 0.9, 0.8])}):
        assert judge(detail, quiet) is None
        assert not recovered(detail, quiet, now=NOW, window=WINDOW)
    nan_only = {"train:loss": every(10, [math.nan] * 7, end=NOW - timedelta(minutes=70))}
    assert not recovered(detail, nan_only, now=NOW, window=WINDOW)


def test_a_recovery_cancels_the_pending_stop() -> None:
    detail = job(tags=DIVERGED_MARK | {"costguard:stop-on-divergence": "true"})
    finding = recovered_finding(
        detail, account=ACCOUNT, region=REGION, price=PRICE, window=WINDOW, observed_at=NOW
    )
    assert finding.cancels_mark and not finding.remediable
    assert finding.reason is Reason.GPU_ACTIVE_AGAIN
    assert finding.resource.id == "llm-sft" and finding.hourly_usd == round(2 * PRICE.usd_per_hour, 4)
    assert "no longer looks diverged" in finding.summary and "pending stop is cancelled" in finding.summary
    assert finding.evidence["marked_for"] == "training_diverged"
    assert decide(finding, Policy(dry_run=False), NOW).action is Action.UNMARK


# --- datapoints added by someone else ------------------------------------------------------------

STARTED = NOW - timedelta(hours=3)  # 09:00
MINUTE = timedelta(minutes=1)
STOPPABLE = {"costguard:stop-on-divergence": "true"}
Points = list[tuple[datetime, float]]


def read_back(*samples: Points) -> tuple[Points, Points]:
    """The samples as GetMetricData gives them at one-minute periods from the start: each minute's Minimum and
    its SampleCount, oldest first, the minute of ``NOW`` excluded."""
    minutes: defaultdict[datetime, list[float]] = defaultdict(list)
    for at, value in (p for points in samples for p in points):
        if STARTED <= at < NOW:
            minutes[STARTED + (at - STARTED) // MINUTE * MINUTE].append(value)
    ordered = sorted(minutes.items())
    return [(at, min(vs)) for at, vs in ordered], [(at, float(len(vs))) for at, vs in ordered]


def healthy_run() -> Points:
    """Three hours of a loss that keeps falling, a reading every 5 minutes from 09:05."""
    return [(STARTED + timedelta(minutes=m), 2.0 / (1 + m / 60)) for m in range(5, 181, 5)]


def finding_of(detail: TrainingJobDetail, values: Points, counts: Points) -> Any:
    """What the training sweep makes of one job's loss read back: None, or its finding."""
    found = judge(detail, {"train:loss": values})
    if found is None:
        return None
    return diverged_finding(
        detail,
        found,
        account=ACCOUNT,
        region=REGION,
        price=PRICE,
        now=NOW,
        observed_at=NOW,
        added=added_datapoints(counts, MINUTE),
    )


@pytest.mark.parametrize("at", ["09:30:00", "09:31:20"])
def test_one_added_low_reading_never_makes_a_plateau(at: str) -> None:
    """The injection: one train:loss = 0.0 at 09:30 (in the job's own minute, or in one of its own), once the
    best reading before the cut, which nothing after it could beat."""
    detail = job(started=STARTED, tags=STOPPABLE)
    added = datetime.fromisoformat(f"2026-11-20T{at}+00:00")
    values, counts = read_back(healthy_run(), [(added, 0.0)])
    assert (added.replace(second=0), 0.0) in values  # the lowest reading of the run
    assert judge(detail, {"train:loss": values}) is None
    assert finding_of(detail, values, counts) is None


def test_one_low_reading_after_the_cut_does_not_break_a_plateau() -> None:
    """Whoever wrote it, one reading sets no level: a flat loss with one lucky reading is still flat (and the
    climb back from that reading, at the start of the window, is no rise either)."""
    learned = every(10, [2.0 - 0.08 * k for k in range(12)], end=NOW - timedelta(minutes=130))
    flat = every(10, [1.12, 1.125, 1.121, 1.123, 1.122, 0.4, 1.121, 1.122, 1.123, 1.121, 1.122, 1.125])
    found = judge(job(), {"train:loss": learned + flat})
    assert found is not None and found.kind == "plateau"
    assert "lowest level 1.12 since, 1.12 before" in found.why


def test_added_rising_readings_never_stop_a_healthy_run() -> None:
    """The injection: 13 train:loss points from 0.01 to 0.13, 11:00 to 12:00, on the job's own minutes. Each
    minute's Minimum is then the added reading, and climbs: the rising rule sees it, but the minutes hold two
    samples where the job writes one, so the finding is only told."""
    detail = job(started=STARTED, tags=STOPPABLE)
    added = [(NOW - timedelta(minutes=60) + n * timedelta(minutes=5), 0.01 * (n + 1)) for n in range(13)]
    values, counts = read_back(healthy_run(), added)
    finding = finding_of(detail, values, counts)
    assert finding is not None and finding.evidence["rule"] == "rising loss"
    assert not finding.remediable
    assert finding.evidence["added_datapoints"] == (
        "2 samples in the 1-minute period from 2026-11-20 11:00 UTC, where the job writes 1"
    )
    assert "holds datapoints the job did not write" in finding.summary
    assert "costguard will not stop it" in finding.summary
    assert "Tag it" not in finding.summary
    decision = decide(finding, Policy(dry_run=False), NOW)
    assert decision.action is Action.NOTIFY
    assert decision.note == "not stopped: its train:loss series holds datapoints the job did not write"


def test_added_rising_readings_between_the_jobs_own_are_no_rise() -> None:
    """The same 13 points two minutes after each of the job's own: its readings and the added ones take turns,
    and the loss goes down as often as up."""
    detail = job(started=STARTED, tags=STOPPABLE)
    added = [(NOW - timedelta(minutes=58) + n * timedelta(minutes=5), 0.01 * (n + 1)) for n in range(13)]
    values, counts = read_back(healthy_run(), added)
    assert finding_of(detail, values, counts) is None
    assert added_datapoints(counts, MINUTE) is not None


def test_a_genuine_rising_loss_still_stops() -> None:
    detail = job(started=STARTED, tags=STOPPABLE)
    falling = [(at, v) for at, v in healthy_run() if at < NOW - timedelta(minutes=60)]
    rising = [(NOW - timedelta(minutes=60) + n * timedelta(minutes=5), 0.8 + 0.05 * n) for n in range(13)]
    values, counts = read_back(falling, rising)
    finding = finding_of(detail, values, counts)
    assert finding is not None and finding.evidence["rule"] == "rising loss"
    assert finding.remediable and finding.evidence["added_datapoints"] is None
    assert decide(finding, Policy(dry_run=False), NOW).action is Action.MARK


def test_a_genuine_nan_still_stops_even_on_a_series_with_added_datapoints() -> None:
    """CloudWatch refuses NaN: no one adds one, so a NaN reading stays evidence enough."""
    detail = job(started=STARTED, tags=STOPPABLE)
    nan_from = NOW - timedelta(minutes=30)
    run = [(at, math.nan if at >= nan_from else v) for at, v in healthy_run()]
    for extra in ([], [(STARTED + timedelta(minutes=30), 0.0)]):
        values, counts = read_back(run, extra)
        finding = finding_of(detail, values, counts)
        assert finding is not None and finding.evidence["rule"] == "NaN or infinity"
        assert finding.remediable
        assert (finding.evidence["added_datapoints"] is None) == (not extra)
        assert decide(finding, Policy(dry_run=False), NOW).action is Action.MARK


# --- checkpoint_stale ----------------------------------------------------------------------------

CKPT = "s3://sagemaker-us-east-1-123456789012/checkpoints/llm/"
INTERVAL = timedelta(minutes=30)


def stale(detail: TrainingJobDetail, seen: CheckpointSeen, location: str = CKPT) -> Any:
    return stale_checkpoint_finding(
        detail,
        location,
        seen,
        account=ACCOUNT,
        region=REGION,
        price=PRICE,
        interval=INTERVAL,
        now=NOW,
        observed_at=NOW,
    )


@pytest.mark.parametrize(
    ("spot", "config", "tag", "expected"),
    [
        (True, CKPT, None, CKPT),  # managed spot with a CheckpointConfig
        (True, None, None, None),  # spot without one: spot_without_checkpoint says so, not this
        (False, CKPT, None, None),  # on demand, untagged: an interruption is not expected
        (False, CKPT, "true", CKPT),  # tagged: its CheckpointConfig
        (False, None, "s3://other-bucket/ckpt/", "s3://other-bucket/ckpt/"),  # tagged with a URI
        (True, CKPT, "false", None),  # opted out
    ],
)
def test_which_jobs_have_their_checkpoint_location_read(
    spot: bool, config: str | None, tag: str | None, expected: str | None
) -> None:
    detail = job(spot=spot, checkpoint=config, tags={"costguard:checkpoint": tag} if tag else {})
    assert checkpoint_location(detail) == expected


def test_an_s3_uri_splits_into_bucket_and_prefix() -> None:
    assert split_s3_uri(CKPT) == ("sagemaker-us-east-1-123456789012", "checkpoints/llm/")
    assert split_s3_uri("s3://bucket") == ("bucket", "")
    assert split_s3_uri("s3:///no-bucket") is None
    assert split_s3_uri("https://example.com/x") is None


def test_a_checkpoint_older_than_the_interval_is_stale_with_the_dollars_at_risk() -> None:
    detail = job(spot=True, checkpoint=CKPT, started=NOW - timedelta(hours=5))
    finding = stale(detail, CheckpointSeen(NOW - timedelta(hours=2), objects=3, truncated=False))
    assert finding is not None and finding.reason is Reason.CHECKPOINT_STALE
    assert finding.evidence["at_risk_usd"] == round(2 * 2 * PRICE.usd_per_hour, 2) == 28.36
    assert finding.evidence["hours_at_risk"] == 2.0
    assert not finding.remediable and finding.cost_usd is None
    assert "$28.36" in finding.summary


def test_a_fresh_checkpoint_is_not_stale() -> None:
    detail = job(spot=True, checkpoint=CKPT, started=NOW - timedelta(hours=5))
    assert stale(detail, CheckpointSeen(NOW - timedelta(minutes=20), objects=3, truncated=False)) is None


def test_no_checkpoint_at_all_puts_the_whole_run_at_risk() -> None:
    detail = job(spot=True, checkpoint=CKPT, started=NOW - timedelta(hours=3))
    finding = stale(detail, CheckpointSeen(None, objects=0, truncated=False))
    assert finding is not None
    assert finding.evidence["at_risk_usd"] == round(3 * 2 * PRICE.usd_per_hour, 2)
    assert "no checkpoint object at all" in finding.summary


def test_a_previous_runs_checkpoint_counts_from_this_runs_start() -> None:
    detail = job(spot=True, checkpoint=CKPT, started=NOW - timedelta(hours=1))
    finding = stale(detail, CheckpointSeen(NOW - timedelta(days=2), objects=10, truncated=False))
    assert finding is not None and finding.evidence["hours_at_risk"] == 1.0
    assert "previous run's" in finding.summary


def test_a_young_run_owes_no_checkpoint_yet() -> None:
    detail = job(spot=True, checkpoint=CKPT, started=NOW - timedelta(minutes=20))
    assert not checkpoint_due(detail, NOW, INTERVAL)
    assert stale(detail, CheckpointSeen(None, objects=0, truncated=False)) is None


def test_an_old_first_page_of_a_larger_prefix_proves_nothing() -> None:
    detail = job(spot=True, checkpoint=CKPT, started=NOW - timedelta(hours=5))
    old_page = CheckpointSeen(NOW - timedelta(hours=4), objects=1000, truncated=True)
    assert stale(detail, old_page) is None
    fresh_page = CheckpointSeen(NOW - timedelta(minutes=5), objects=1000, truncated=True)
    assert stale(detail, fresh_page) is None
