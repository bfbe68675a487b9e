"""The right-sizing rules, usage summaries and report assembly, on plain data."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from costguard.audit.evaluate import Catalog, evaluate, parse_params
from costguard.audit.html import render_html
from costguard.audit.model import Subject, TypeFacts, TypeOption, Usage
from costguard.audit.report import build_report, region_result
from costguard.audit.rules import RulesFileError, load_rules, parse_rules
from costguard.audit.usage import percentile, summarize
from costguard.model import Reason, ResourceKind

NOW = datetime(2026, 11, 20, 12, tzinfo=UTC)
RULES = parse_rules()
A10G = 22888
FACTS = {
    "g5.xlarge": TypeFacts(name="g5.xlarge", accelerator_kind="nvidia_gpu", accelerator_count=1, accelerator_model="A10G", accelerator_memory_mib=A10G, vcpus=4),
    "g5.2xlarge": TypeFacts(name="g5.2xlarge", accelerator_kind="nvidia_gpu", accelerator_count=1, accelerator_model="A10G", accelerator_memory_mib=A10G, vcpus=8),
    "g5.12xlarge": TypeFacts(name="g5.12xlarge", accelerator_kind="nvidia_gpu", accelerator_count=4, accelerator_model="A10G", accelerator_memory_mib=A10G, vcpus=48),
    "g6.xlarge": TypeFacts(name="g6.xlarge", accelerator_kind="nvidia_gpu", accelerator_count=1, accelerator_model="L4", accelerator_memory_mib=A10G, vcpus=4),
    "p4d.24xlarge": TypeFacts(name="p4d.24xlarge", accelerator_kind="nvidia_gpu", accelerator_count=8, accelerator_model="A100", accelerator_memory_mib=40960, vcpus=96),
    "trn1.32xlarge": TypeFacts(name="trn1.32xlarge", accelerator_kind="neuron", accelerator_count=16, accelerator_model="Trainium", accelerator_memory_mib=32768, vcpus=128),
}  # fmt: skip
PRICES = {
    "g5.xlarge": 1.006,
    "g5.2xlarge": 1.212,
    "g5.12xlarge": 5.672,
    "g6.xlarge": 0.8048,
    "p4d.24xlarge": 21.958,
    "trn1.32xlarge": 21.5,
}


def catalog(without: tuple[str, ...] = ()) -> Catalog:
    options = [
        TypeOption(facts=FACTS[t], instance_type=t, hourly_usd=p)
        for t, p in PRICES.items()
        if t not in without
    ]
    return Catalog(options, PRICES)


def subject(instance_type: str, **extra: object) -> Subject:
    fields: dict[str, object] = {
        "kind": ResourceKind.EC2_INSTANCE,
        "id": "i-0123456789abcdef0",
        "account": "123456789012",
        "region": "us-east-1",
        "instance_type": instance_type,
        "facts": FACTS.get(instance_type),
    }
    return Subject.model_validate(fields | extra)


def usage(
    per_gpu_p95: tuple[float, ...], *, memory_gib: float, cpu: float = 10.0, hours: float = 336.0
) -> Usage:
    busiest = max(per_gpu_p95)
    return Usage(
        window_hours=336,
        period_hours=2,
        hours_observed=hours,
        gpu_p50=busiest - 5,
        gpu_p95=busiest,
        gpu_max=busiest + 2,
        per_gpu_p95=per_gpu_p95,
        memory_peak_mib=memory_gib * 1024,
        memory_total_peak_mib=memory_gib * 1024,
        cpu_p95=cpu,
    )


def judge(s: Subject, u: Usage | None = None, cat: Catalog | None = None) -> list[Reason]:
    findings, _ = evaluate([s], {s.key: u} if u else {}, cat or catalog(), RULES)
    return [f.reason for f in findings]


def test_idle_means_stop_and_saves_the_whole_price() -> None:
    s = subject("g5.12xlarge")
    [finding], _ = evaluate([s], {s.key: usage((2, 1, 1, 1), memory_gib=0.5, cpu=3)}, catalog(), RULES)
    assert finding.reason is Reason.RIGHTSIZE_IDLE
    assert finding.recommended_type is None
    assert finding.monthly_saving_usd == round(5.672 * 730, 2)


def test_a_busy_cpu_is_not_idle() -> None:
    s = subject("g5.12xlarge")
    assert Reason.RIGHTSIZE_IDLE not in judge(s, usage((2, 1, 1, 1), memory_gib=0.5, cpu=80))


def test_downsize_keeps_the_gpu_model_and_enough_vcpus() -> None:
    s = subject("g5.12xlarge")
    # One GPU at 70%: 1 GPU; CPU 10% of 48 vCPUs x 1.25 = 6: the 4-vCPU g5.xlarge is too small.
    [finding], _ = evaluate([s], {s.key: usage((70, 2, 2, 2), memory_gib=10)}, catalog(), RULES)
    assert finding.reason is Reason.RIGHTSIZE_DOWNSIZE
    assert finding.recommended_type == "g5.2xlarge"
    assert finding.monthly_saving_usd == round((5.672 - 1.212) * 730, 2)


def test_no_downsize_when_the_gpus_are_all_needed() -> None:
    s = subject("g5.12xlarge")
    assert judge(s, usage((90, 90, 90, 90), memory_gib=20)) == []


def test_family_moves_a_light_workload_to_a_cheaper_gpu_that_holds_its_memory() -> None:
    s = subject("g5.xlarge")
    [finding], _ = evaluate([s], {s.key: usage((40,), memory_gib=8, cpu=20)}, catalog(), RULES)
    assert finding.reason is Reason.RIGHTSIZE_FAMILY
    assert finding.recommended_type == "g6.xlarge"


def test_family_never_moves_a_compute_bound_workload() -> None:
    s = subject("g5.xlarge")
    assert judge(s, usage((85,), memory_gib=8, cpu=20)) == []


def test_family_needs_the_memory_to_fit_with_headroom() -> None:
    s = subject("g5.xlarge")
    # 20 GiB x 1.2 = 24 GiB > the L4's 22.35 GiB.
    assert judge(s, usage((40,), memory_gib=20, cpu=20)) == []


def test_a_type_with_no_price_or_no_capacity_is_never_recommended() -> None:
    s = subject("g5.xlarge")
    assert judge(s, usage((40,), memory_gib=8, cpu=20), catalog(without=("g6.xlarge",))) == []


def test_too_little_data_is_skipped_not_judged() -> None:
    s = subject("g5.12xlarge")
    findings, skipped = evaluate([s], {s.key: usage((2, 1, 1, 1), memory_gib=0.5, hours=4)}, catalog(), RULES)
    assert findings == []
    assert "too little GPU data" in skipped[0].why


def test_an_unpriced_type_is_skipped_and_named() -> None:
    s = subject("g7.xlarge")
    findings, skipped = evaluate([s], {}, catalog(), RULES)
    assert findings == []
    assert skipped[0].why == "no price known for g7.xlarge in us-east-1: not in the bundled table"
    assert skipped[0].hourly_usd is None  # unknown, never zero


def test_too_little_data_is_skipped_with_what_it_costs() -> None:
    s = subject("g5.12xlarge", instance_count=2)
    _, [skipped] = evaluate([s], {s.key: usage((2, 1, 1, 1), memory_gib=0.5, hours=4)}, catalog(), RULES)
    assert skipped.hourly_usd == round(5.672 * 2, 4)
    assert "4 h observed of 336 h" in skipped.why


@pytest.mark.parametrize(
    ("text", "billions"),
    [
        ("7B", 7),
        ("70b", 70),
        ("1.3e9", 1.3),
        ("175000000000", 175),
        ("350M", 0.35),
        ("1T", 1000),
        ("x", None),
    ],
)
def test_model_params_are_read_in_any_usual_spelling(text: str, billions: float | None) -> None:
    assert parse_params(text) == (pytest.approx(billions) if billions is not None else None)


def test_model_size_maps_a_small_inference_model_to_a_small_class() -> None:
    s = subject("p4d.24xlarge", tags={"costguard:model-params": "7B", "costguard:workload": "inference"})
    [finding], _ = evaluate([s], {}, catalog(), RULES)
    assert finding.reason is Reason.RIGHTSIZE_MODEL_SIZE
    # 7e9 x 2 bytes x 1.2 = 15.6 GiB fits one 22 GiB GPU
    assert finding.recommended_type == "g6.xlarge"
    assert finding.evidence["sized_as_workload"] == "inference"
    assert "declared workload inference: 2 bytes per parameter" in finding.summary
    # Nothing measured: compute fit cannot be shown, so the risk is high and the confidence low.
    assert (finding.projected_gpu_percent, finding.risk, finding.confidence) == (None, "high", "low")


def test_model_size_leaves_a_large_model_on_its_class() -> None:
    assert judge(subject("p4d.24xlarge", tags={"costguard:model-params": "70B"})) == []


def test_experiments_go_to_a_small_instance_on_spot() -> None:
    s = subject("p4d.24xlarge", tags={"costguard:workload": "experiment"})
    [finding], _ = evaluate([s], {}, catalog(), RULES)
    assert finding.reason is Reason.RIGHTSIZE_MODEL_SIZE
    assert (finding.recommended_type, finding.recommended_market) == ("g6.xlarge", "spot")


def test_spot_needs_checkpoints_long_runs_and_on_demand() -> None:
    tags = {"costguard:workload": "training", "costguard:checkpoint": "s3://b/ckpt/"}
    [finding], _ = evaluate([subject("g5.12xlarge", tags=tags, running_hours=48)], {}, catalog(), RULES)
    assert finding.reason is Reason.RIGHTSIZE_SPOT
    assert finding.monthly_saving_usd == round((5.672 - round(5.672 * 0.4, 4)) * 730, 2)
    no_checkpoint = {"costguard:workload": "training"}
    assert judge(subject("g5.12xlarge", tags=no_checkpoint, running_hours=48)) == []
    assert judge(subject("g5.12xlarge", tags=tags, running_hours=2)) == []
    assert judge(subject("g5.12xlarge", tags=tags, running_hours=48, spot=True)) == []


def test_sagemaker_checkpoint_config_counts_as_checkpoints() -> None:
    s = subject(
        "g5.12xlarge",
        kind=ResourceKind.TRAINING_JOB,
        tags={"costguard:workload": "training"},
        checkpointed=True,
        running_hours=30,
    )
    assert judge(s) == [Reason.RIGHTSIZE_SPOT]


def test_trainium_candidate_needs_transformer_training_and_cumulative_hours() -> None:
    tags = {"costguard:workload": "transformer-training"}
    [finding], _ = evaluate([subject("p4d.24xlarge", tags=tags, running_hours=250)], {}, catalog(), RULES)
    assert finding.reason is Reason.TRAINIUM_CANDIDATE
    assert finding.recommended_type == "trn1.32xlarge"
    assert finding.confidence == "low"
    assert "Neuron SDK" in finding.evidence["caveat"]
    assert judge(subject("p4d.24xlarge", tags=tags, running_hours=20)) == []
    # Two instances count twice.
    assert judge(subject("p4d.24xlarge", tags=tags, running_hours=120, instance_count=2)) == [
        Reason.TRAINIUM_CANDIDATE
    ]


def test_one_finding_per_resource_the_largest_saving_with_the_rest_as_alternatives() -> None:
    tags = {
        "costguard:workload": "lora",
        "costguard:checkpoint": "s3://b/",
        "costguard:model-params": "7B",
    }
    s = subject("p4d.24xlarge", tags=tags, running_hours=48)
    [finding], _ = evaluate([s], {}, catalog(), RULES)
    # LoRA on 7B: 7e9 x 4 bytes x 1.2 = 31.3 GiB, the 4 A10Gs of a g5.12xlarge: 16.29/h saved beats spot's 13.17/h
    assert finding.reason is Reason.RIGHTSIZE_MODEL_SIZE
    assert finding.recommended_type == "g5.12xlarge"
    assert [a["reason"] for a in finding.alternatives] == ["rightsize_spot"]


def test_a_rules_override_changes_only_what_it_names(tmp_path: Path) -> None:
    path = tmp_path / "rules.json"
    path.write_text(json.dumps({"idle": {"gpu_max_percent": 1.0}, "spot": {"discount": 0.7}}))
    rules = load_rules(path)
    assert rules.idle.gpu_max_percent == 1.0
    assert rules.idle.cpu_p95_percent == RULES.idle.cpu_p95_percent
    assert rules.spot.discount == 0.7
    assert rules.trainium == RULES.trainium


@pytest.mark.parametrize(
    ("content", "problem"),
    [("{", "not JSON"), ("[1]", "one JSON object"), ('{"idle": {"gpu_max_percent": -1}}', "gpu_max_percent")],
)
def test_a_bad_rules_file_is_named(tmp_path: Path, content: str, problem: str) -> None:
    path = tmp_path / "rules.json"
    path.write_text(content)
    with pytest.raises(RulesFileError) as caught:
        load_rules(path)
    assert str(path) in str(caught.value)
    assert problem in str(caught.value)


def test_percentile_is_nearest_rank() -> None:
    values = list(range(1, 101))
    assert percentile(values, 95) == 95
    assert percentile(values, 50) == 50
    assert percentile([3.0], 95) == 3.0


def test_summarize_takes_the_busiest_gpu_per_period_and_sums_memory() -> None:
    start = NOW - timedelta(hours=4)
    at = [start + timedelta(hours=h) for h in range(4)]
    usage_ = summarize(
        start=start,
        window_hours=4,
        period_hours=1,
        gpu={
            0: [(t, 10.0) for t in at],
            1: [(t, v) for t, v in zip(at, [50.0, 60.0, 70.0, 80.0], strict=True)],
        },
        memory_used_mib={0: [(t, 1000.0) for t in at], 1: [(t, 3000.0) for t in at]},
        cpu=[(t, 20.0) for t in at],
    )
    assert (usage_.gpu_p50, usage_.gpu_max) == (60.0, 80.0)
    assert usage_.per_gpu_p95 == (10.0, 80.0)
    assert usage_.memory_peak_mib == 3000.0
    assert usage_.memory_total_peak_mib == 4000.0
    assert usage_.hours_observed == 4
    assert usage_.coverage == 1.0


def test_summarize_draws_no_chart_point_before_the_launch() -> None:
    """A resource launched two days into a 4-day window has no chart point for those days: not 0%."""
    start = NOW - timedelta(days=4)
    launched = start + timedelta(days=2)
    hours = [launched + timedelta(hours=h) for h in range(48)]
    usage_ = summarize(start=start, window_hours=96, period_hours=1, gpu={0: [(t, 40.0) for t in hours]})
    assert usage_.chart == (None,) * 8 + (40.0,) * 8
    assert usage_.gpu_p50 == 40.0
    # An idle GPU's 0% is a point, still drawn.
    idle = summarize(start=start, window_hours=96, period_hours=1, gpu={0: [(t, 0.0) for t in hours]})
    assert idle.chart == (None,) * 8 + (0.0,) * 8


def test_report_totals_groups_and_failed_regions() -> None:
    s = subject("g5.12xlarge", tags={"team": "vision"})
    findings, skipped = evaluate([s], {s.key: usage((2, 1, 1, 1), memory_gib=0.5, cpu=3)}, catalog(), RULES)
    ok = region_result(
        "us-east-1", findings, skipped, audited=1, monthly_cost_usd=5.672 * 730, team_tag="team"
    )
    failed = {"region": "eu-west-3", "status": "failed", "error": "AccessDenied", "cause": "no"}
    report = build_report(
        run="r1",
        generated_at=NOW,
        window_start=NOW - timedelta(days=14),
        window_end=NOW,
        regions=[ok, failed],
    )
    assert report["totals"]["failed_regions"] == ["eu-west-3"]
    assert report["totals"]["monthly_saving_usd"] == round(5.672 * 730, 2)
    # No team totals in this region result: the team's findings only.
    assert report["by_team"] == {
        "vision": {
            "resources": 0,
            "instances": 0,
            "monthly_cost_usd": 0.0,
            "findings": 1,
            "monthly_saving_usd": round(5.672 * 730, 2),
        }
    }
    assert report["by_rule"]["rightsize_idle"]["findings"] == 1
    page = render_html(report)
    assert 'id="failed-regions"' in page
    assert page.count('<tr class="finding"') == 1
    # Self-contained: no script, nothing fetched; its only addresses are links to the AWS console.
    body = page.split("<body>", 1)[1]
    assert "<script" not in page and "src=" not in body
    assert set(re.findall(r'href="(https://[^/"]+)/', body)) == {"https://us-east-1.console.aws.amazon.com"}


def test_html_escapes_what_users_named() -> None:
    s = subject("g5.12xlarge", name="<img src=x onerror=alert(1)>")
    findings, _ = evaluate([s], {s.key: usage((2, 1, 1, 1), memory_gib=0.5, cpu=3)}, catalog(), RULES)
    result = region_result("us-east-1", findings, [], audited=1, monthly_cost_usd=1, team_tag="team")
    report = build_report(run="r", generated_at=NOW, window_start=NOW, window_end=NOW, regions=[result])
    assert "<img" not in render_html(report)
