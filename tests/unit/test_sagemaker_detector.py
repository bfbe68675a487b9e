"""SageMaker verdicts: stalled jobs (per-GPU normalisation, every host), idle notebooks, endpoints nobody calls."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from costguard.detect.gpu import Series, Thresholds, Verdict, read_gpus
from costguard.detect.sagemaker import (
    Candidate,
    VariantUse,
    endpoint_findings,
    endpoint_underused_findings,
    notebook_findings,
    per_gpu,
    read_training_job,
    training_job_findings,
)
from costguard.local.template import Template
from costguard.model import (
    MARK_TAG_KEY,
    Accelerators,
    Action,
    Endpoint,
    EndpointVariant,
    Finding,
    NotebookInstance,
    Reason,
    ResourceKind,
    TrainingJob,
    mark_reason,
    mark_text,
)
from costguard.policy import Policy, decide, marked_at
from costguard.pricing import Price
from costguard.settings import parse_settings
from tests.conftest import ROOT

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
THRESHOLDS = Thresholds()  # 5% idle over 30 minutes, 70% starved over 2 hours, 1-minute periods
A100x8 = Accelerators(kind="nvidia_gpu", count=8, model="A100")
A10G = Accelerators(kind="nvidia_gpu", count=1, model="A10G")
PRICE = Price(usd_per_hour=1.408, source="bundled table of 2026-09-30")
ACCOUNT, REGION = "123456789012", "us-east-1"


def flat(value: float, minutes: int = 120) -> Series:
    """One datapoint a minute at ``value`` over the last ``minutes`` minutes."""
    return [(NOW - timedelta(minutes=m), value) for m in range(minutes - 1, -1, -1)]


def job(
    *, count: int = 2, tags: dict[str, str] | None = None, started: datetime | None = None
) -> TrainingJob:
    return TrainingJob(
        name="bert-pretrain-hung",
        arn=f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:training-job/bert-pretrain-hung",
        account=ACCOUNT,
        region=REGION,
        instance_type="ml.p4d.24xlarge",
        instance_count=count,
        started=started or NOW - timedelta(hours=5),
        tags=tags or {},
        accelerators=A100x8,
    )


def notebook(tags: dict[str, str] | None = None) -> NotebookInstance:
    return NotebookInstance(
        name="dana-scratch",
        arn=f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:notebook-instance/dana-scratch",
        account=ACCOUNT,
        region=REGION,
        instance_type="ml.g5.xlarge",
        status="InService",
        tags=tags or {},
        accelerators=A10G,
    )


def endpoint(*variants: EndpointVariant, created: datetime | None = NOW - timedelta(days=30)) -> Endpoint:
    return Endpoint(
        name="sentiment-canary",
        arn=f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:endpoint/sentiment-canary",
        account=ACCOUNT,
        region=REGION,
        created=created,
        variants=variants or (EndpointVariant("AllTraffic", "ml.g5.xlarge", 1, A10G),),
        tags={"team": "nlp"},
    )


def job_findings(hosts: dict[int, Series], the_job: TrainingJob | None = None, price: Price | None = PRICE):
    the_job = the_job or job()
    reading = read_training_job(hosts, the_job, NOW, THRESHOLDS)
    return reading, training_job_findings(the_job, reading, price=price, thresholds=THRESHOLDS, now=NOW)


# -- training jobs ------------------------------------------------------------------------------


def test_summed_utilization_is_divided_by_the_gpus_of_the_host() -> None:
    assert per_gpu([(NOW, 800.0), (NOW, 8.0)], 8) == [(NOW, 100.0), (NOW, 1.0)]


def test_eight_gpus_at_one_percent_each_is_a_stalled_job() -> None:
    # 8% summed over 8 GPUs: over the 5% threshold unless normalised to 1% per GPU.
    reading, [finding] = job_findings({1: flat(8.0), 2: flat(8.0)})
    assert reading.verdict is Verdict.IDLE
    assert reading.busiest_gpu_percent == pytest.approx(1.0)
    assert finding.reason is Reason.JOB_STALLED
    assert finding.remediable is True
    assert finding.resource.kind is ResourceKind.TRAINING_JOB
    assert finding.resource.arn == job().arn
    assert finding.resource.instance_count == 2
    assert finding.hourly_usd == round(PRICE.usd_per_hour * 2, 4)
    assert "every host" in finding.summary


def test_summed_utilization_over_the_threshold_per_gpu_is_not_stalled() -> None:
    # 48% summed is 6% per GPU: above the 5% threshold.
    reading, findings = job_findings({1: flat(48.0), 2: flat(48.0)})
    assert reading.verdict is not Verdict.IDLE
    assert findings == []


def test_one_busy_host_keeps_the_job_alive() -> None:
    reading, findings = job_findings({1: flat(8.0), 2: flat(720.0)})
    assert reading.verdict is Verdict.BUSY
    assert findings == []


def test_a_silent_host_is_never_counted_idle() -> None:
    reading, findings = job_findings({1: flat(8.0)})  # algo-2 published nothing
    assert reading.verdict is not Verdict.IDLE
    assert findings == []


def test_unknown_price_is_unknown_never_zero() -> None:
    _, [finding] = job_findings({1: flat(0.0), 2: flat(0.0)}, price=None)
    assert finding.hourly_usd is None
    assert finding.evidence["price_source"] == "unknown"


def test_job_with_no_metrics_after_the_window_is_missing_metrics_never_stalled() -> None:
    reading, [finding] = job_findings({})
    assert reading.verdict is Verdict.NO_METRICS
    assert finding.reason is Reason.GPU_METRICS_MISSING
    assert finding.remediable is False


def test_job_that_just_started_with_no_metrics_yet_gives_nothing() -> None:
    _, findings = job_findings({}, job(started=NOW - timedelta(minutes=10)))
    assert findings == []


def test_marked_job_that_works_again_cancels_its_stop() -> None:
    marked = job(tags={MARK_TAG_KEY: (NOW - timedelta(minutes=10)).isoformat()})
    _, [finding] = job_findings({1: flat(720.0), 2: flat(720.0)}, marked)
    assert finding.reason is Reason.GPU_ACTIVE_AGAIN
    assert finding.cancels_mark is True


def test_a_job_marked_for_its_cost_or_a_diverged_run_keeps_its_mark_while_it_works() -> None:
    """The SageMaker idle sweep cancels only the marks that working again answers: a job marked by the training
    sweep for its cost ceiling or a diverged run is busy by nature, and would otherwise never be stopped."""
    at = NOW - timedelta(minutes=10)
    for reason in (Reason.JOB_COST_CEILING, Reason.TRAINING_DIVERGED):
        marked = job(tags={MARK_TAG_KEY: mark_text(at, reason.value)})
        assert mark_reason(marked.tags) == reason.value
        _, findings = job_findings({1: flat(720.0), 2: flat(720.0)}, marked)
        assert findings == []
    stalled = job(tags={MARK_TAG_KEY: mark_text(at, Reason.JOB_STALLED.value)})
    _, [finding] = job_findings({1: flat(720.0), 2: flat(720.0)}, stalled)
    assert finding.reason is Reason.GPU_ACTIVE_AGAIN and finding.cancels_mark


def test_a_mark_that_says_why_still_gives_its_moment_to_the_grace_period() -> None:
    at = NOW - timedelta(minutes=10)
    assert marked_at({MARK_TAG_KEY: mark_text(at, Reason.JOB_COST_CEILING.value)}) == at
    assert marked_at({MARK_TAG_KEY: mark_text(at)}) == at


# -- notebook instances -------------------------------------------------------------------------


def _notebook(gpus: dict[int, Series], the_notebook: NotebookInstance | None = None):
    the_notebook = the_notebook or notebook()
    reading = read_gpus(gpus, NOW, THRESHOLDS, 1)
    return notebook_findings(the_notebook, reading, price=PRICE, thresholds=THRESHOLDS, now=NOW)


def test_idle_notebook_is_notebook_idle_and_remediable() -> None:
    [finding] = _notebook({0: flat(1.0)})
    assert finding.reason is Reason.NOTEBOOK_IDLE
    assert finding.remediable is True
    assert finding.resource.kind is ResourceKind.NOTEBOOK
    assert finding.hourly_usd == PRICE.usd_per_hour


def test_gpu_notebook_without_metrics_is_missing_metrics_never_idle() -> None:
    [finding] = _notebook({})
    assert finding.reason is Reason.GPU_METRICS_MISSING
    assert finding.remediable is False
    assert "NotebookInstanceName" in str(finding.evidence["how_to_fix"])
    assert decide(finding, Policy(dry_run=False), NOW).action is Action.NOTIFY


def test_busy_notebook_gives_nothing() -> None:
    assert _notebook({0: flat(92.0)}) == []


def test_marked_notebook_that_works_again_cancels_its_stop() -> None:
    [finding] = _notebook({0: flat(92.0)}, notebook({MARK_TAG_KEY: NOW.isoformat()}))
    assert finding.reason is Reason.GPU_ACTIVE_AGAIN


# -- endpoints ----------------------------------------------------------------------------------

WINDOW = timedelta(hours=24)
G52X = EndpointVariant("AllTraffic", "ml.g5.2xlarge", 1, A10G)


def _endpoint(the_endpoint: Endpoint, invocations: float | None, prices: dict[str, Price | None]):
    return endpoint_findings(the_endpoint, invocations, prices=prices, window=WINDOW, now=NOW)


@pytest.mark.parametrize("invocations", [1.0, 5400.0])
def test_endpoint_with_invocations_gives_nothing(invocations: float) -> None:
    assert _endpoint(endpoint(), invocations, {"ml.g5.xlarge": PRICE}) == []


@pytest.mark.parametrize("invocations", [None, 0.0])
def test_gpu_endpoint_without_invocations_is_idle_and_notify_only(invocations: float | None) -> None:
    [finding] = _endpoint(endpoint(), invocations, {"ml.g5.xlarge": PRICE})
    assert finding.reason is Reason.ENDPOINT_IDLE
    assert finding.remediable is False
    assert finding.hourly_usd == PRICE.usd_per_hour
    assert finding.resource.kind is ResourceKind.ENDPOINT
    assert decide(finding, Policy(dry_run=False), NOW).action is Action.NOTIFY


def test_idle_endpoint_cost_sums_its_variants_and_is_unknown_if_one_price_is() -> None:
    two = endpoint(
        EndpointVariant("a", "ml.g5.xlarge", 2, A10G), EndpointVariant("b", "ml.g5.2xlarge", 1, A10G)
    )
    [known] = _endpoint(two, 0, {"ml.g5.xlarge": PRICE, "ml.g5.2xlarge": PRICE})
    assert known.hourly_usd == round(PRICE.usd_per_hour * 3, 4)
    [unknown] = _endpoint(two, 0, {"ml.g5.xlarge": PRICE, "ml.g5.2xlarge": None})
    assert unknown.hourly_usd is None


def test_endpoint_younger_than_the_window_is_not_judged() -> None:
    young = endpoint(G52X, created=NOW - timedelta(hours=3))
    assert _endpoint(young, None, {}) == []


def test_cpu_and_serverless_endpoints_are_not_gpu_endpoints() -> None:
    cpu = endpoint(EndpointVariant("AllTraffic", "ml.m5.large", 1, None))
    serverless = endpoint(EndpointVariant("AllTraffic", None, 0, None))
    assert _endpoint(cpu, 0, {}) == []
    assert _endpoint(serverless, 0, {}) == []


# -- endpoints serving a trickle -------------------------------------------------------------------

A10G_24 = Accelerators(kind="nvidia_gpu", count=1, model="A10G", memory_mib=24576)
FOUR_A10G = Accelerators(kind="nvidia_gpu", count=4, model="A10G", memory_mib=24576)
BIG = EndpointVariant("AllTraffic", "ml.g5.12xlarge", 1, FOUR_A10G)
BIG_PRICE = Price(usd_per_hour=7.09, source="bundled table")
SIZES = [
    Candidate("ml.g5.xlarge", A10G_24, PRICE),
    Candidate("ml.g5.2xlarge", A10G_24, Price(1.515, "bundled table")),
    Candidate("ml.g5.12xlarge", FOUR_A10G, BIG_PRICE),
    Candidate("ml.g6.xlarge", Accelerators("nvidia_gpu", 1, "L4", 23034), Price(0.9, "bundled table")),
]


def _underused(
    variant: EndpointVariant, use: VariantUse, candidates: list[Candidate] = SIZES
) -> list[Finding]:
    return endpoint_underused_findings(
        endpoint(variant),
        {variant.name: use},
        prices={"ml.g5.12xlarge": BIG_PRICE, "ml.g5.xlarge": PRICE},
        candidates=candidates,
        window=WINDOW,
        now=NOW,
    )


def test_a_trickle_on_four_gpus_is_priced_per_1000_invocations_with_a_cheaper_fit() -> None:
    # 720 invocations a day; SageMaker reports the four GPUs summed: 12% is 3% each.
    [finding] = _underused(BIG, VariantUse(720, 12.0, 60.0, active_hours=24))
    assert finding.reason is Reason.ENDPOINT_UNDERUSED
    assert finding.remediable is False
    assert decide(finding, Policy(dry_run=False), NOW).action is Action.NOTIFY
    assert finding.hourly_usd == 7.09
    # $7.09 x 24 h / (720 / 1,000)
    assert finding.evidence["cost_per_1000_invocations_usd"] == round(7.09 * 24 / 0.72, 4)
    assert finding.evidence["busiest_hour_gpu_percent"] == 3.0
    fits = finding.evidence["cheaper_fits"]
    assert isinstance(fits, list)
    [fit] = fits
    # Same model only (no L4), one GPU carries 12% of load, 60% of 24 GB x 1.2 fits one A10G.
    assert fit.startswith("1 x ml.g5.xlarge (1 x A10G): $1.41/h, $46.9333 per 1,000 invocations")
    assert "$236.3333 per 1,000 invocations" in finding.summary
    assert finding.evidence["estimated_saving_per_hour_usd"] == round(7.09 - 1.408, 4)


def test_memory_that_needs_the_big_instance_keeps_it_and_says_why() -> None:
    # 4 x 80% of 24 GB in use: no single A10G holds it.
    [finding] = _underused(BIG, VariantUse(720, 12.0, 320.0, active_hours=24))
    assert finding.evidence["cheaper_fits"] == []
    assert "no cheaper g5 size" in str(finding.evidence["smaller_instance_not_proposed"])


def test_fewer_instances_and_scale_to_zero_are_offered_as_estimates() -> None:
    three = EndpointVariant("AllTraffic", "ml.g5.xlarge", 3, A10G_24)
    [finding] = _underused(three, VariantUse(90, 5.0, None, active_hours=3))
    fits = finding.evidence["cheaper_fits"]
    assert isinstance(fits, list) and len(fits) == 2
    scale_to_zero, fewer = fits  # cheapest first
    assert scale_to_zero.startswith(
        "an inference component on ml.g5.xlarge with MinInstanceCount=0: about $4.22"
    )
    assert "estimate" in scale_to_zero and "NoCapacityInvocationFailures" in scale_to_zero
    assert fewer.startswith("1 x ml.g5.xlarge instead of 3: $1.41/h")
    assert "GPU memory not measured" in str(finding.evidence["smaller_instance_not_proposed"])


@pytest.mark.parametrize(
    "use",
    [
        VariantUse(720, 200.0, 60.0, 24),  # 50% per GPU: used
        VariantUse(0, 4.0, 10.0, 0),  # no traffic: endpoint_idle's
        VariantUse(None, None, None, 0),
        VariantUse(720, None, None, 24),  # no GPU reading: never called underused
    ],
)
def test_used_silent_or_unread_endpoints_are_not_underused(use: VariantUse) -> None:
    assert _underused(BIG, use) == []


def test_an_inference_component_scaled_to_zero_is_neither_idle_nor_underused() -> None:
    # MinInstanceCount=0 and no traffic: DescribeEndpoint reports the variant with no instance.
    scaled_to_zero = endpoint(EndpointVariant("AllTraffic", "ml.g5.12xlarge", 0, FOUR_A10G))
    assert _endpoint(scaled_to_zero, None, {"ml.g5.12xlarge": BIG_PRICE}) == []
    assert (
        endpoint_underused_findings(
            scaled_to_zero,
            {"AllTraffic": VariantUse(None, None, None, 0)},
            prices={"ml.g5.12xlarge": BIG_PRICE},
            candidates=SIZES,
            window=WINDOW,
            now=NOW,
        )
        == []
    )


# -- settings -----------------------------------------------------------------------------------


def test_endpoint_idle_hours_default_is_the_templates(monkeypatch: pytest.MonkeyPatch) -> None:
    defaults = Template.load(ROOT / "template.yaml").parameter_defaults()
    assert parse_settings().endpoint_idle_hours == int(defaults["EndpointIdleHours"]) == 24
    monkeypatch.setenv("COSTGUARD_ENDPOINT_IDLE_HOURS", "0")
    with pytest.raises(ValueError, match="COSTGUARD_ENDPOINT_IDLE_HOURS"):
        parse_settings()
