"""Every headroom, target and limit of the audit's rules (audit/evaluate.py, values from audit/rules.json), each
with a case that comes out as it does only because of it: the value exactly, just under and just over, and a
case whose raw figure fits while the figure with headroom does not.

The values come from the packaged rules (``parse_rules()``) where a case can be derived from them; the fixed
cases (20 GiB on a g5.12xlarge, ...) hold the documented defaults, so a rules file that set a headroom to 1.0
fails them too.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from costguard.audit.evaluate import Catalog, evaluate
from costguard.audit.model import AuditFinding, Subject, TypeFacts, TypeOption, Usage
from costguard.audit.rules import Rules, parse_rules
from costguard.model import Reason, ResourceKind

RULES = parse_rules()
RULES_FILE = Path(__file__).resolve().parents[2] / "shared" / "costguard" / "audit" / "rules.json"
GIB = 1024  # MiB
A10G = L4 = 22888  # MiB per GPU (22.35 GiB), as DescribeInstanceTypes gives them
L40S, T4, A100 = 45776, 16384, 40960


def _facts(
    name: str, model: str, count: int, memory_mib: int, vcpus: int, kind: str = "nvidia_gpu"
) -> TypeFacts:
    return TypeFacts(
        name=name,
        accelerator_kind=kind,
        accelerator_count=count,
        accelerator_model=model,
        accelerator_memory_mib=memory_mib,
        vcpus=vcpus,
    )


FACTS = {
    "p4d.24xlarge": _facts("p4d.24xlarge", "A100", 8, A100, 96),
    "g5.xlarge": _facts("g5.xlarge", "A10G", 1, A10G, 4),
    "g5.2xlarge": _facts("g5.2xlarge", "A10G", 1, A10G, 8),
    "g5.12xlarge": _facts("g5.12xlarge", "A10G", 4, A10G, 48),
    "g5.48xlarge": _facts("g5.48xlarge", "A10G", 8, A10G, 192),
    "g6.xlarge": _facts("g6.xlarge", "L4", 1, L4, 4),
    "g6.12xlarge": _facts("g6.12xlarge", "L4", 4, L4, 48),
    "g6.48xlarge": _facts("g6.48xlarge", "L4", 8, L4, 192),
    "g6e.xlarge": _facts("g6e.xlarge", "L40S", 1, L40S, 4),
    "g6e.48xlarge": _facts("g6e.48xlarge", "L40S", 8, L40S, 192),
    "g4dn.xlarge": _facts("g4dn.xlarge", "T4", 1, T4, 4),
    "trn1.32xlarge": _facts("trn1.32xlarge", "Trainium", 16, 32768, 128, kind="neuron"),
}
PRICES = {
    "p4d.24xlarge": 21.958,
    "g5.xlarge": 1.006,
    "g5.2xlarge": 1.212,
    "g5.12xlarge": 5.672,
    "g5.48xlarge": 16.288,
    "g6.xlarge": 0.8048,
    "g6.12xlarge": 4.6016,
    "g6.48xlarge": 13.3504,
    "g6e.xlarge": 1.861,
    "g6e.48xlarge": 30.13118,
    "g4dn.xlarge": 0.526,
    "trn1.32xlarge": 21.5,
}
ONE_A10G = {"g5.xlarge", "g5.2xlarge"}


def catalog() -> Catalog:
    return Catalog(
        [TypeOption(facts=FACTS[t], instance_type=t, hourly_usd=p) for t, p in PRICES.items()], PRICES
    )


def subject(instance_type: str, **extra: object) -> Subject:
    fields: dict[str, object] = {
        "kind": ResourceKind.EC2_INSTANCE,
        "id": "i-0123456789abcdef0",
        "account": "123456789012",
        "region": "us-east-1",
        "instance_type": instance_type,
        "facts": FACTS[instance_type],
    }
    return Subject.model_validate(fields | extra)


def usage(
    per_gpu_p95: tuple[float, ...],
    *,
    peak_mib: float,
    total_mib: float | None = None,
    cpu: float = 10.0,
    hours: float = 336.0,
    window: float = 336.0,
    gpu_max: float | None = None,
) -> Usage:
    """Usage with the fullest GPU's memory peak (``peak_mib``) and the peak of the sum (``total_mib``, default the
    same) set apart."""
    busiest = max(per_gpu_p95)
    return Usage(
        window_hours=window,
        period_hours=2,
        hours_observed=hours,
        gpu_p50=max(0.0, busiest - 3),
        gpu_p95=busiest,
        gpu_max=busiest + 2 if gpu_max is None else gpu_max,
        per_gpu_p95=per_gpu_p95,
        memory_peak_mib=peak_mib,
        memory_total_peak_mib=peak_mib if total_mib is None else total_mib,
        cpu_p95=cpu,
    )


def judge(s: Subject, used: Usage | None, rules: Rules = RULES) -> list[AuditFinding]:
    findings, _ = evaluate([s], {s.key: used} if used is not None else {}, catalog(), rules)
    assert len(findings) <= 1  # one subject, at most one finding
    return findings


def moves(findings: list[AuditFinding]) -> dict[Reason, dict[str, Any]]:
    """Each rule that proposed a move, the best and its alternatives alike: its target, risk and confidence."""
    out: dict[Reason, dict[str, Any]] = {}
    for f in findings:
        out[f.reason] = {"recommended_type": f.recommended_type, "risk": f.risk, "confidence": f.confidence}
        for a in f.alternatives:
            out[Reason(a["reason"])] = {k: a[k] for k in ("recommended_type", "risk", "confidence")}
    return out


def target(findings: list[AuditFinding], reason: Reason) -> str | None:
    """The type ``reason`` proposed; None if the rule proposed nothing (a stop is never asked of this helper)."""
    move = moves(findings).get(reason)
    return None if move is None else move["recommended_type"]


def test_the_rules_file_keeps_every_headroom_above_one() -> None:
    """rules.json as shipped (read as text, not through the model): a headroom of 1.0 would size to the measured
    peak exactly. Not the only guard: every headroom below has a case that fails without it."""
    raw = json.loads(RULES_FILE.read_text(encoding="utf-8"))
    assert raw["downsize"]["memory_headroom"] == RULES.downsize.memory_headroom > 1
    assert raw["downsize"]["cpu_headroom"] == RULES.downsize.cpu_headroom > 1
    assert raw["family"]["memory_headroom"] == RULES.family.memory_headroom > 1
    assert raw["model_size"]["memory_headroom"] == RULES.model_size.memory_headroom > 1


# --- downsize: memory headroom ----------------------------------------------------------------------------------


def test_downsize_memory_headroom_keeps_20_gib_off_one_a10g() -> None:
    """downsize.memory_headroom: a g5.12xlarge (4 x A10G) whose GPUs use 20 GiB in all fits one 22.35 GiB A10G
    raw, but not with the headroom (20 x 1.2 = 24 GiB): no one-GPU g5 (nor anything else cheaper). At 18 GiB
    (21.6 GiB with headroom) it is sent to a g5.2xlarge (6 vCPUs wanted: the g5.xlarge's 4 are too few)."""
    s = subject("g5.12xlarge")
    tight = usage((40.0, 2.0, 2.0, 2.0), peak_mib=20 * GIB)
    assert 20 * GIB < A10G < 20 * GIB * RULES.downsize.memory_headroom
    assert judge(s, tight) == []
    # Only the headroom decides: without it (1.0) the same usage is sent to one A10G.
    no_headroom = parse_rules({"downsize": {"memory_headroom": 1.0}})
    assert target(judge(s, tight, no_headroom), Reason.RIGHTSIZE_DOWNSIZE) == "g5.2xlarge"

    [fits] = judge(s, usage((40.0, 2.0, 2.0, 2.0), peak_mib=18 * GIB))
    assert (fits.reason, fits.recommended_type) == (Reason.RIGHTSIZE_DOWNSIZE, "g5.2xlarge")


@pytest.mark.parametrize(("delta_mib", "sent"), [(-1.0, True), (1.0, False)])
def test_downsize_memory_headroom_at_its_edge(delta_mib: float, sent: bool) -> None:
    """The edge derived from rules.json: a total peak of one A10G / memory_headroom, a MiB under (sent to one
    A10G) or over (not), the raw peak fitting one A10G either way."""
    total = A10G / RULES.downsize.memory_headroom + delta_mib
    assert total < A10G
    s = subject("g5.12xlarge")
    found = target(judge(s, usage((40.0, 2.0, 2.0, 2.0), peak_mib=total)), Reason.RIGHTSIZE_DOWNSIZE)
    assert found == ("g5.2xlarge" if sent else None)


# --- downsize: CPU headroom ---------------------------------------------------------------------------------------


def test_downsize_cpu_headroom_keeps_a_busy_cpu_off_four_vcpus() -> None:
    """downsize.cpu_headroom: a g5.12xlarge (48 vCPUs) at CPU p95 7% uses 3.36 vCPUs, which a g5.xlarge's 4
    hold raw but not with the headroom (x 1.25 = 4.2): the downsize is the g5.2xlarge (8). At 6% (2.88 x 1.25 =
    3.6 vCPUs) it is the g5.xlarge."""
    s = subject("g5.12xlarge")
    assert 0.07 * 48 < 4 < 0.07 * 48 * RULES.downsize.cpu_headroom
    assert target(
        judge(s, usage((40.0, 2.0, 2.0, 2.0), peak_mib=8 * GIB, cpu=7.0)), Reason.RIGHTSIZE_DOWNSIZE
    ) == ("g5.2xlarge")
    assert target(
        judge(s, usage((40.0, 2.0, 2.0, 2.0), peak_mib=8 * GIB, cpu=6.0)), Reason.RIGHTSIZE_DOWNSIZE
    ) == ("g5.xlarge")


@pytest.mark.parametrize(("factor", "expected"), [(0.99, "g5.xlarge"), (1.01, "g5.2xlarge")])
def test_downsize_cpu_headroom_at_its_edge(factor: float, expected: str) -> None:
    """The CPU p95 at which a g5.12xlarge's vCPUs needed, with rules.json's headroom, are the g5.xlarge's 4."""
    edge = 4 / (48 * RULES.downsize.cpu_headroom) * 100
    cpu = edge * factor
    assert cpu / 100 * 48 < 4  # raw, the 4 vCPUs would do either way
    s = subject("g5.12xlarge")
    used = usage((40.0, 2.0, 2.0, 2.0), peak_mib=8 * GIB, cpu=cpu)
    assert target(judge(s, used), Reason.RIGHTSIZE_DOWNSIZE) == expected


# --- downsize: the GPU target -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("delta", "needed", "expected"),
    [(0.0, 1, "g5.xlarge"), (-0.01, 1, "g5.xlarge"), (0.01, 2, "g5.12xlarge")],
)
def test_downsize_needs_the_load_over_the_gpu_target_in_gpus(
    delta: float, needed: int, expected: str
) -> None:
    """downsize.gpu_target_percent: a g5.48xlarge (8 x A10G) whose GPUs' p95 sum to the target exactly needs one
    GPU; 0.01 over it, two (a g5.12xlarge). The one-GPU projection of target + 0.01 rounds to the fit limit
    (80.0%), so only the target keeps it off one GPU. The busiest GPU is above the family rule's limit, so the
    downsize is the finding."""
    goal = RULES.downsize.gpu_target_percent
    busiest = RULES.family.gpu_p95_max_percent + 1
    per_gpu = (busiest, round(goal - busiest + delta, 2), 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    [finding] = judge(subject("g5.48xlarge"), usage(per_gpu, peak_mib=4 * GIB, cpu=1.0))
    assert finding.reason is Reason.RIGHTSIZE_DOWNSIZE
    assert finding.evidence["needed_gpus"] == needed == math.ceil(round(goal + delta, 2) / goal - 1e-9)
    assert finding.recommended_type == expected


# --- the fit limit and the low-risk limit -------------------------------------------------------------------------


@pytest.mark.parametrize(("delta", "recommended"), [(0.0, True), (-0.1, True), (0.1, False)])
def test_no_target_projected_above_the_fit_limit(delta: float, recommended: bool) -> None:
    """fit.max_projected_percent: the same type on spot for checkpointed training (projection: its own p95) is
    recommended at exactly the limit (80%), not 0.1 over it (projections are rounded to 0.1)."""
    p95 = RULES.fit.max_projected_percent + delta
    tags = {"costguard:workload": "training", "costguard:checkpoint": "s3://b/ckpt/"}
    s = subject("g5.xlarge", tags=tags, running_hours=48)
    findings = judge(s, usage((p95,), peak_mib=8 * GIB))
    if recommended:
        [finding] = findings
        assert (finding.reason, finding.recommended_type) == (Reason.RIGHTSIZE_SPOT, "g5.xlarge")
        assert finding.projected_gpu_percent == round(p95, 1)
    else:
        assert findings == []


@pytest.mark.parametrize(("delta", "risk"), [(0.0, "low"), (-0.1, "low"), (0.1, "medium")])
def test_low_risk_is_a_projection_at_or_under_the_low_risk_limit(delta: float, risk: str) -> None:
    """fit.low_risk_percent: a downsize projected at exactly 60% per GPU (memory measured, full window) is low
    risk; 0.1 over it, medium."""
    p95 = RULES.fit.low_risk_percent + delta
    [finding] = judge(subject("g5.12xlarge"), usage((p95, 0.0, 0.0, 0.0), peak_mib=4 * GIB))
    assert (finding.reason, finding.recommended_type) == (Reason.RIGHTSIZE_DOWNSIZE, "g5.2xlarge")
    assert finding.projected_gpu_percent == round(p95, 1)
    assert finding.risk == risk


@pytest.mark.parametrize(("observed", "confidence"), [(95.0, "high"), (94.9, "medium"), (95.1, "high")])
def test_high_confidence_needs_the_full_window_share(observed: float, confidence: str) -> None:
    """fit.full_window_coverage: 95 of 100 hours observed is the full window (high confidence); 94.9 is not."""
    assert RULES.fit.full_window_coverage * 100 == 95.0
    used = usage((40.0, 0.0, 0.0, 0.0), peak_mib=4 * GIB, hours=observed, window=100.0)
    [finding] = judge(subject("g5.12xlarge"), used)
    assert finding.reason is Reason.RIGHTSIZE_DOWNSIZE
    assert finding.confidence == confidence


# --- family: per-GPU and total memory headroom, GPU limit ---------------------------------------------------------


def test_family_per_gpu_headroom_rejects_what_the_total_would_let_through() -> None:
    """family.memory_headroom on the fullest GPU: a g5.12xlarge with two GPUs at 20 GiB (40 GiB in all). Four L4s
    (g6.12xlarge, 89.4 GiB) hold the total with headroom (48 GiB), and one L4 holds 20 GiB raw, but not 20 x 1.2 =
    24 GiB: only the per-GPU headroom keeps it off the g6.12xlarge, and nothing cheaper carries it."""
    s = subject("g5.12xlarge")
    tight = usage((30.0, 30.0, 1.0, 1.0), peak_mib=20 * GIB, total_mib=40 * GIB)
    headroom = RULES.family.memory_headroom
    assert 40 * GIB * headroom <= FACTS["g6.12xlarge"].total_accelerator_memory_mib  # the total fits
    assert 20 * GIB < L4 < 20 * GIB * headroom  # one GPU fits raw, not with headroom
    assert judge(s, tight) == []


def test_family_per_gpu_headroom_lets_a_fitting_peak_through() -> None:
    """Two GPUs at 18 GiB (36 GiB in all): 21.6 GiB a GPU with headroom fits an L4: the g6.12xlarge."""
    s = subject("g5.12xlarge")
    [finding] = judge(s, usage((30.0, 30.0, 1.0, 1.0), peak_mib=18 * GIB, total_mib=36 * GIB))
    assert (finding.reason, finding.recommended_type) == (Reason.RIGHTSIZE_FAMILY, "g6.12xlarge")


@pytest.mark.parametrize(("delta_mib", "moved"), [(-1.0, True), (1.0, False)])
def test_family_per_gpu_headroom_at_its_edge(delta_mib: float, moved: bool) -> None:
    """The fullest GPU at one L4 / family.memory_headroom (rules.json), a MiB under or over; the total twice it."""
    peak = L4 / RULES.family.memory_headroom + delta_mib
    used = usage((30.0, 30.0, 1.0, 1.0), peak_mib=peak, total_mib=2 * peak)
    found = target(judge(subject("g5.12xlarge"), used), Reason.RIGHTSIZE_FAMILY)
    assert found == ("g6.12xlarge" if moved else None)


@pytest.mark.parametrize(("total_gib", "expected"), [(80, "g6.48xlarge"), (70, "g6.12xlarge")])
def test_family_total_headroom_sizes_the_target_count(total_gib: int, expected: str) -> None:
    """family.memory_headroom on the total: a g6e.48xlarge (8 x L40S) using 15 GiB a GPU (18 with headroom: an L4
    holds it either way). 80 GiB in all fits four L4s (89.4 GiB) raw, not with headroom (96 GiB): eight L4s
    (g6.48xlarge). 70 GiB (84 with headroom) fits four (g6.12xlarge)."""
    headroom = RULES.family.memory_headroom
    four = FACTS["g6.12xlarge"].total_accelerator_memory_mib
    assert 15 * GIB * headroom <= L4
    if total_gib == 80:
        assert 80 * GIB < four < 80 * GIB * headroom
    used = usage((10.0,) * 8, peak_mib=15 * GIB, total_mib=total_gib * GIB)
    assert target(judge(subject("g6e.48xlarge"), used), Reason.RIGHTSIZE_FAMILY) == expected


@pytest.mark.parametrize(("delta", "moved"), [(0.0, True), (-0.01, True), (0.01, False)])
def test_family_moves_only_gpus_at_or_under_its_p95_limit(delta: float, moved: bool) -> None:
    """family.gpu_p95_max_percent: a g5.12xlarge whose busiest GPU's p95 is exactly 60% may move to an L40S
    (g6e.xlarge); 0.01 over, no family move (the downsize to one A10G is proposed either way)."""
    p95 = RULES.family.gpu_p95_max_percent + delta
    found = moves(judge(subject("g5.12xlarge"), usage((p95, 1.0, 1.0, 1.0), peak_mib=8 * GIB, cpu=5.0)))
    assert found[Reason.RIGHTSIZE_DOWNSIZE]["recommended_type"] == "g5.xlarge"
    assert (found.get(Reason.RIGHTSIZE_FAMILY) or {}).get("recommended_type") == (
        "g6e.xlarge" if moved else None
    )


# --- idle: the GPU and CPU limits, and the coverage a verdict needs -------------------------------------------------


@pytest.mark.parametrize(
    ("gpu_max", "cpu", "stopped"),
    [
        (5.0, 10.0, True),  # both at their limits
        (4.99, 9.99, True),
        (5.01, 10.0, False),  # the GPU just over
        (5.0, 10.01, False),  # the CPU just over
    ],
)
def test_idle_is_gpu_and_cpu_at_or_under_their_limits(gpu_max: float, cpu: float, stopped: bool) -> None:
    """idle.gpu_max_percent (5) and idle.cpu_p95_percent (10): a stop needs the GPU max and the CPU p95 at or
    under both."""
    assert (RULES.idle.gpu_max_percent, RULES.idle.cpu_p95_percent) == (5.0, 10.0)
    used = usage((1.0, 1.0, 1.0, 1.0), peak_mib=1 * GIB, cpu=cpu, gpu_max=gpu_max)
    found = moves(judge(subject("g5.12xlarge"), used))
    assert (Reason.RIGHTSIZE_IDLE in found) is stopped, found
    if stopped:
        assert found[Reason.RIGHTSIZE_IDLE]["recommended_type"] is None  # a stop


@pytest.mark.parametrize(("observed", "judged"), [(50.0, True), (49.9, False), (50.1, True)])
def test_a_verdict_needs_the_minimum_coverage(observed: float, judged: bool) -> None:
    """min_coverage (0.5): 50 of 100 hours observed is judged (an idle machine is stopped); 49.9 is skipped."""
    assert RULES.min_coverage * 100 == 50.0
    s = subject("g5.12xlarge")
    used = usage((1.0, 1.0, 1.0, 1.0), peak_mib=1 * GIB, cpu=3.0, hours=observed, window=100.0)
    findings, skipped = evaluate([s], {s.key: used}, catalog(), RULES)
    if judged:
        assert [f.reason for f in findings] == [Reason.RIGHTSIZE_IDLE]
        assert skipped == []
    else:
        assert findings == []
        [why] = skipped
        assert "too little GPU data" in why.why


# --- model size: declared memory headroom, measured total headroom, band limit ------------------------------------


def test_model_size_headroom_keeps_a_declared_model_off_one_gpu() -> None:
    """model_size.memory_headroom on a declared size: a 1.2B full fine-tune holds 1.2e9 x 18 bytes = 20.1 GiB,
    which one L4 holds raw but not with headroom (24.1 GiB): the L40S (g6e.xlarge). A 1B one (20.1 GiB with
    headroom) goes to one L4 (g6.xlarge)."""
    tags = {"costguard:workload": "fine-tune"}
    raw = 1.2e9 * RULES.model_size.bytes_per_param["fine-tune"] / 2**20
    assert raw < L4 < raw * RULES.model_size.memory_headroom
    big = judge(subject("p4d.24xlarge", tags=tags | {"costguard:model-params": "1.2B"}), None)
    assert target(big, Reason.RIGHTSIZE_MODEL_SIZE) == "g6e.xlarge"
    small = judge(subject("p4d.24xlarge", tags=tags | {"costguard:model-params": "1B"}), None)
    assert target(small, Reason.RIGHTSIZE_MODEL_SIZE) == "g6.xlarge"


@pytest.mark.parametrize(("factor", "expected"), [(0.99, "g6.xlarge"), (1.01, "g6e.xlarge")])
def test_model_size_headroom_at_its_edge(factor: float, expected: str) -> None:
    """The declared fine-tune size whose memory with rules.json's headroom is one L4, 1% under or over."""
    per_param = RULES.model_size.bytes_per_param["fine-tune"]
    billions = L4 * 2**20 / (per_param * RULES.model_size.memory_headroom) / 1e9 * factor
    assert billions * 1e9 * per_param / 2**20 < L4  # raw, one L4 would do either way
    tags = {"costguard:workload": "fine-tune", "costguard:model-params": f"{billions:.4f}B"}
    assert target(judge(subject("p4d.24xlarge", tags=tags), None), Reason.RIGHTSIZE_MODEL_SIZE) == expected


@pytest.mark.parametrize(("total_gib", "expected"), [(20, "g6e.xlarge"), (18, "g6.xlarge")])
def test_model_size_headroom_on_the_measured_total(total_gib: int, expected: str) -> None:
    """model_size.memory_headroom on the measured total peak: a declared 1B fine-tune (one L4 by declaration)
    measured at 20 GiB in all fits one L4 raw, not with headroom (24 GiB): the L40S; at 18 GiB, one L4."""
    tags = {"costguard:workload": "fine-tune", "costguard:model-params": "1B"}
    used = usage((1.0,) * 8, peak_mib=total_gib * GIB / 8, total_mib=total_gib * GIB, cpu=50.0)
    assert target(judge(subject("p4d.24xlarge", tags=tags), used), Reason.RIGHTSIZE_MODEL_SIZE) == expected


@pytest.mark.parametrize(("total_gib", "expected"), [(20, None), (18, "g6.xlarge")])
def test_experiment_headroom_on_the_measured_total(total_gib: int, expected: str | None) -> None:
    """The experiment rule sizes its one-GPU spot target with the same headroom: 20 GiB measured (24 with
    headroom) fits no one-GPU type of its families (none then: no experiment move); 18 GiB, one L4."""
    used = usage((1.0,) * 8, peak_mib=total_gib * GIB / 8, total_mib=total_gib * GIB, cpu=50.0)
    s = subject("p4d.24xlarge", tags={"costguard:workload": "experiment"})
    assert target(judge(s, used), Reason.RIGHTSIZE_MODEL_SIZE) == expected


@pytest.mark.parametrize(("declared", "small_band"), [("10B", True), ("9.99B", True), ("10.01B", False)])
def test_model_size_band_limit_is_inclusive(declared: str, small_band: bool) -> None:
    """model_size.bands[0].up_to_billion (10): a 10B inference model belongs to the small band (g5/g6/g6e), so a
    p4d.24xlarge running it is moved; at 10.01B the band holding p4d applies, and nothing is proposed."""
    assert RULES.model_size.bands[0].up_to_billion == 10
    tags = {"costguard:workload": "inference", "costguard:model-params": declared}
    findings = judge(subject("p4d.24xlarge", tags=tags), None)
    if small_band:
        found = target(findings, Reason.RIGHTSIZE_MODEL_SIZE)
        assert found is not None and found.split(".")[0] in RULES.model_size.bands[0].families
    else:
        assert findings == []


# --- spot and Trainium: their running-hours limits ----------------------------------------------------------------


@pytest.mark.parametrize(("hours", "proposed"), [(24.0, True), (23.9, False), (24.1, True)])
def test_spot_needs_the_minimum_running_hours(hours: float, proposed: bool) -> None:
    """spot.min_running_hours (24): checkpointed training on on-demand for exactly 24 h is sent to spot."""
    assert RULES.spot.min_running_hours == 24
    tags = {"costguard:workload": "training", "costguard:checkpoint": "s3://b/ckpt/"}
    findings = judge(subject("g5.12xlarge", tags=tags, running_hours=hours), None)
    if proposed:
        [finding] = findings
        assert (finding.reason, finding.recommended_market) == (Reason.RIGHTSIZE_SPOT, "spot")
    else:
        assert findings == []


@pytest.mark.parametrize(
    ("hours", "count", "proposed"),
    [(200.0, 1, True), (199.9, 1, False), (200.1, 1, True), (100.0, 2, True), (99.9, 2, False)],
)
def test_trainium_needs_the_minimum_cumulative_hours(hours: float, count: int, proposed: bool) -> None:
    """trainium.min_cumulative_hours (200), over all the subject's instances: 200 instance-hours of transformer
    training on A100s is a Trainium candidate (trn1.32xlarge); 199.9 is not."""
    assert RULES.trainium.min_cumulative_hours == 200
    tags = {"costguard:workload": "transformer-training"}
    s = subject("p4d.24xlarge", tags=tags, running_hours=hours, instance_count=count)
    findings = judge(s, None)
    if proposed:
        [finding] = findings
        assert (finding.reason, finding.recommended_type) == (Reason.TRAINIUM_CANDIDATE, "trn1.32xlarge")
    else:
        assert findings == []
