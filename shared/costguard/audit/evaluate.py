"""The right-sizing rules: subjects, their usage and the priced types of a region in, findings out (pure).

Each rule that fires proposes a target; a resource gets one finding, the rule that saves the most (ties go to
the rule listed first in RULE_ORDER), with the others kept as alternatives so totals never count a resource
twice. A target is always a type with a price and capacity in the region (the catalog holds nothing else).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from costguard.audit.fit import Projection, load_percent, project
from costguard.audit.model import AuditFinding, Subject, TypeOption, Usage, family_of
from costguard.audit.rules import Rules
from costguard.model import Reason, ResourceKind
from costguard.pricing import not_offered, why_unpriced

RULE_ORDER = (
    Reason.RIGHTSIZE_IDLE,
    Reason.RIGHTSIZE_DOWNSIZE,
    Reason.RIGHTSIZE_FAMILY,
    Reason.RIGHTSIZE_MODEL_SIZE,
    Reason.RIGHTSIZE_SPOT,
    Reason.TRAINIUM_CANDIDATE,
)
_RANK = {reason: n for n, reason in enumerate(RULE_ORDER)}
MIB_PER_GIB = 1024


class Catalog:
    """The types a recommendation may point at in one region, cheapest first, and the price of every type."""

    def __init__(self, options: Iterable[TypeOption], prices: Mapping[str, float]) -> None:
        self.prices = dict(prices)
        self.by_family: dict[str, list[TypeOption]] = defaultdict(list)
        self.by_type: dict[str, TypeOption] = {}
        for option in sorted(options, key=lambda o: (o.hourly_usd, o.instance_type)):
            self.by_family[_family_key(option.instance_type)].append(option)
            self.by_type[option.instance_type] = option
            self.prices.setdefault(option.instance_type, option.hourly_usd)

    def in_families(self, families: Iterable[str], *, sagemaker: bool) -> list[TypeOption]:
        prefix = "ml." if sagemaker else ""
        found = [o for f in families for o in self.by_family.get(prefix + f, [])]
        return sorted(found, key=lambda o: (o.hourly_usd, o.instance_type))


def _family_key(instance_type: str) -> str:
    return ("ml." if instance_type.startswith("ml.") else "") + family_of(instance_type)


@dataclass(frozen=True)
class _Hit:
    reason: Reason
    target: str | None  # the recommended type; None: stop it
    market: str
    hourly_after: float  # per instance
    confidence: str
    summary: str
    evidence: dict[str, Any]
    risk: str = "low"
    projection: Projection | None = None  # None: nothing runs on a target (stop)


@dataclass(frozen=True)
class Skipped:
    """A subject the audit could not judge, and why (unpriced type, too little data, silent GPUs), with what it
    costs over ``cost_hours`` (a month, or the hours it ran in the window: see ``cost_hours``)."""

    subject: Subject
    why: str
    hourly_usd: float | None = None  # per hour for all its instances; None: no price known
    cost_hours: float | None = None  # None: a month (hours_per_month)
    cost_basis: str = "month"


# What a rule may say of a machine whose price is unknown: a stop or fewer GPUs of the same model always spends
# less; another family or a declared size's band may not.
UNPRICED_RULES = frozenset({Reason.RIGHTSIZE_IDLE, Reason.RIGHTSIZE_DOWNSIZE})


def cost_hours(subject: Subject, window_hours: float, rules: Rules) -> tuple[float, str]:
    """The hours a resource's cost and saving are figured over, and that basis: a month ("month") where it runs
    continuously (the whole window, or since a start the audit does not know); the hours it ran in the window
    ("window") for a training job, which ends by itself, and for anything that did not run the whole window."""
    ran = subject.running_hours
    if subject.kind is ResourceKind.TRAINING_JOB:
        hours = min(ran, window_hours) if ran > 0 and window_hours else (ran or window_hours)
        if hours > 0:
            return round(hours, 1), "window"
    if window_hours and 0 < ran < window_hours * rules.fit.full_window_coverage:
        return round(ran, 1), "window"
    return rules.hours_per_month, "month"


def silent_gpus(subject: Subject, used: Usage | None) -> list[int]:
    """The GPUs of a machine that published no datapoint while others did: it cannot be judged whole."""
    count = subject.facts.accelerator_count if subject.facts else 0
    if used is None or used.gpus_reporting is None or not used.gpus_reporting or not count:
        return []
    return [index for index in range(count) if index not in used.gpus_reporting]


def _silent_why(silent: list[int], count: int) -> str:
    names = ", ".join(str(i) for i in silent)
    return (
        f"GPU{'s' if len(silent) > 1 else ''} {names} of {count} published no data over the window: not judged "
        f"on the other {count - len(silent)} (a silent GPU may carry the work; check its CloudWatch agent)"
    )


def evaluate(
    subjects: Sequence[Subject],
    usage: Mapping[str, Usage],
    catalog: Catalog,
    rules: Rules,
    *,
    window_hours: float | None = None,
) -> tuple[list[AuditFinding], list[Skipped]]:
    """Each subject judged whole: a finding, nothing (nothing cheaper carries it), or skipped with why.
    ``window_hours``: the lookback (default: each subject's usage's window)."""
    findings: list[AuditFinding] = []
    skipped: list[Skipped] = []
    for subject in subjects:
        used = usage.get(subject.key)
        window = window_hours if window_hours is not None else (used.window_hours if used else 0.0)
        judged = _judge(subject, used, catalog, rules, window)
        if isinstance(judged, AuditFinding):
            findings.append(judged)
        elif judged is not None:
            skipped.append(judged)
    findings.sort(key=lambda f: (f.monthly_saving_usd is None, -(f.monthly_saving_usd or 0.0), f.subject.key))
    return findings, skipped


def _judge(
    subject: Subject, used: Usage | None, catalog: Catalog, rules: Rules, window: float
) -> AuditFinding | Skipped | None:
    """One subject's finding, or why it was skipped, or None (judged: nothing cheaper carries its work)."""
    price = catalog.prices.get(subject.instance_type)
    hours, basis = cost_hours(subject, window, rules)
    hourly = None if price is None else round(price * subject.instance_count, 4)
    if silent := silent_gpus(subject, used):
        count = subject.facts.accelerator_count if subject.facts else 0
        return Skipped(subject, _silent_why(silent, count), hourly, hours, basis)
    judged = used is not None and used.gpu_max is not None and used.coverage >= rules.min_coverage
    measured = used if judged else None
    if price is None:
        # A verdict never waits for a price: an idle or oversized machine is told so, its cost unknown.
        hits = [] if measured is None else _usage_hits(subject, measured, 0.0, catalog, rules)
        hits = [h for h in hits if h.reason in UNPRICED_RULES]
        if not hits:
            return Skipped(subject, why_unpriced(subject.instance_type, subject.region), None, hours, basis)
        return _finding(subject, used, None, hits, rules, hours, basis)
    hits = [h for h in _tag_hits(subject, measured, price, catalog, rules) if h.hourly_after < price]
    if measured is not None:
        hits = [
            h for h in _usage_hits(subject, measured, price, catalog, rules) if h.hourly_after < price
        ] + hits
    if hits:
        return _finding(subject, used, price, hits, rules, hours, basis)
    if not judged and subject.facts is not None and subject.facts.accelerator_kind != "neuron":
        observed = used.hours_observed if used else 0.0
        seen = used.window_hours if used else 0.0
        return Skipped(
            subject,
            f"too little GPU data ({observed:g} h observed of {seen:g} h, "
            f"{rules.min_coverage:.0%} needed): not judged",
            hourly,
            hours,
            basis,
        )
    return None


def _finding(
    subject: Subject,
    used: Usage | None,
    price: float | None,
    hits: list[_Hit],
    rules: Rules,
    hours: float,
    basis: str,
) -> AuditFinding:
    """The hit that saves the most over ``hours`` (by rule order where the price is unknown), the others as
    alternatives."""
    monthly = None if price is None else round(price * subject.instance_count * hours, 2)

    def saving(hit: _Hit) -> float | None:
        if price is None:
            return None
        return round((price - hit.hourly_after) * subject.instance_count * hours, 2)

    ranked = sorted(hits, key=lambda h: (-(saving(h) or 0.0), _RANK[h.reason]))
    best = ranked[0]
    evidence = dict(best.evidence)
    if best.projection is not None:
        evidence.update(best.projection.evidence())
    evidence["risk"] = best.risk
    evidence["cost_basis"] = _basis_text(subject, hours, basis)
    summary = best.summary
    if price is None:
        evidence["price"] = why_unpriced(subject.instance_type, subject.region)
        summary += f" Cost unknown: {evidence['price']}."
    if used is not None:
        evidence.update(_measured(used))
    return AuditFinding(
        reason=best.reason,
        subject=subject,
        summary=summary,
        current_hourly_usd=price,
        recommended_type=best.target,
        recommended_market=best.market,
        recommended_hourly_usd=best.hourly_after if best.target else None,
        monthly_cost_usd=monthly,
        monthly_saving_usd=saving(best),
        cost_basis=basis,
        cost_hours=hours,
        confidence=best.confidence,
        risk=best.risk,
        projected_gpu_percent=best.projection.percent if best.projection else None,
        evidence=evidence,
        alternatives=tuple(
            {
                "reason": h.reason.value,
                "recommended_type": h.target,
                "market": h.market,
                "monthly_saving_usd": saving(h),
                "projected_gpu_p95_percent": h.projection.percent if h.projection else None,
                "risk": h.risk,
                "confidence": h.confidence,
            }
            for h in ranked[1:]
        ),
        chart=used.chart if used else (),
    )


def _basis_text(subject: Subject, hours: float, basis: str) -> str:
    if basis == "month":
        return f"a month ({hours:g} h): it runs continuously"
    if subject.kind is ResourceKind.TRAINING_JOB:
        return f"what it spent over the window ({hours:g} h): a job ends by itself, it is not projected"
    return (
        f"what it spent over the window ({hours:g} h): it did not run the whole window, it is not projected"
    )


def _measured(used: Usage) -> dict[str, Any]:
    return {
        "gpu_p50_percent": used.gpu_p50,
        "gpu_p95_percent": used.gpu_p95,
        "gpu_max_percent": used.gpu_max,
        "per_gpu_p95_percent": list(used.per_gpu_p95),
        "gpu_memory_peak_gib": _gib(used.memory_peak_mib),
        "cpu_p95_percent": used.cpu_p95,
        "hours_observed": used.hours_observed,
        "window_hours": used.window_hours,
    }


def _pct(value: float | None) -> str:
    return "?" if value is None else f"{round(value, 1):g}"


def _gib(mib: float | None) -> float | None:
    return None if mib is None else round(mib / MIB_PER_GIB, 1)


def _full_window(used: Usage | None, rules: Rules) -> bool:
    return used is not None and used.coverage >= rules.fit.full_window_coverage


def _assess(
    subject: Subject,
    used: Usage | None,
    target: TypeOption | None,
    rules: Rules,
    *,
    memory_measured: bool,
) -> tuple[Projection, str, str] | None:
    """The projection onto ``target``, its performance risk and confidence; None: not recommendable.

    A target whose projected p95 per GPU exceeds ``fit.max_projected_percent`` is never recommended. Confidence
    is "high" only when compute fits with headroom and memory was checked against a measured peak, over a full
    window; a projection that cannot be made (nothing measured, a device the table lacks) is "low" and "high" risk.
    """
    projection = project(subject.facts, used, target.facts if target else None)
    fit = rules.fit
    if projection.percent is None:
        if used is not None:
            return None  # measured, but not projectable onto this device: compute fit cannot be shown
        return projection, "high", "low"
    if projection.percent > fit.max_projected_percent:
        return None
    full = _full_window(used, rules)
    low = projection.percent <= fit.low_risk_percent and memory_measured and full
    risk = "low" if low else "medium"
    confidence = "high" if memory_measured and full else "medium"
    return projection, risk, confidence


def _projected_text(projection: Projection) -> str:
    if projection.percent is None:
        return f"projected utilization unknown ({projection.basis})"
    return f"projected p95 {projection.percent:g}% per GPU ({projection.basis})"


def _worse(a: str, b: str) -> str:
    order = {"low": 0, "medium": 1, "high": 2}
    return a if order[a] >= order[b] else b


def _lower(a: str, b: str) -> str:
    order = {"low": 0, "medium": 1, "high": 2}
    return a if order[a] <= order[b] else b


def _usage_hits(subject: Subject, used: Usage, price: float, catalog: Catalog, rules: Rules) -> list[_Hit]:
    """The rules that read measured usage: idle (stop it), else fewer GPUs of the same model, or another family
    whose GPUs hold the measured memory. ``used`` has GPU data (``gpu_max`` is known)."""
    assert used.gpu_max is not None
    idle = _idle_hit(used, rules)
    if idle is not None:
        return [idle]
    facts = subject.facts
    if facts is None or facts.accelerator_kind not in ("nvidia_gpu", "gpu") or not facts.accelerator_count:
        return []
    load = load_percent(used, facts) or 0.0
    vcpus_needed = (used.cpu_p95 or 0.0) / 100 * facts.vcpus * rules.downsize.cpu_headroom
    hits = [
        _downsize_hit(subject, used, catalog, rules, load=load, vcpus_needed=vcpus_needed),
        _family_hit(subject, used, catalog, rules, load=load, vcpus_needed=vcpus_needed),
    ]
    return [hit for hit in hits if hit is not None]


def _idle_hit(used: Usage, rules: Rules) -> _Hit | None:
    """Stop it: no GPU and hardly any CPU busy over the whole window. Never an endpoint that served requests in
    it: a trickle on an oversized GPU is a smaller type's case (the downsize and family rules), not a stop."""
    assert used.gpu_max is not None
    idle = rules.idle
    if not (used.gpu_max <= idle.gpu_max_percent and (used.cpu_p95 or 0.0) <= idle.cpu_p95_percent):
        return None
    if (used.invocations or 0.0) > 0:
        return None
    full = _full_window(used, rules)
    return _Hit(
        Reason.RIGHTSIZE_IDLE,
        None,
        "stop",
        0.0,
        "high" if full else "medium",
        f"No GPU above {used.gpu_max:g}% in {used.hours_observed:g} h: stop it.",
        {"projection_basis": "stopped: nothing runs"},
        risk="low",
    )


def _downsize_hit(
    subject: Subject, used: Usage, catalog: Catalog, rules: Rules, *, load: float, vcpus_needed: float
) -> _Hit | None:
    """The cheapest type of the same family and GPU model with fewer GPUs that still fit the load and the
    measured memory (with headroom)."""
    facts = subject.facts
    assert facts is not None
    compute_gpus = math.ceil(load / rules.downsize.gpu_target_percent - 1e-9)
    memory_gpus = 0
    memory_total = (used.memory_total_peak_mib or 0.0) * rules.downsize.memory_headroom
    if used.memory_total_peak_mib and facts.accelerator_memory_mib:
        memory_gpus = math.ceil(memory_total / facts.accelerator_memory_mib - 1e-9)
    needed = max(1, compute_gpus, memory_gpus)
    if not needed < facts.accelerator_count:
        return None
    sagemaker = subject.instance_type.startswith("ml.")
    memory_measured = used.memory_total_peak_mib is not None
    for option in catalog.in_families([facts.family], sagemaker=sagemaker):
        o = option.facts
        if (
            o.accelerator_model != facts.accelerator_model
            or not needed <= o.accelerator_count < facts.accelerator_count
            or o.vcpus < vcpus_needed
            or memory_total > o.total_accelerator_memory_mib
        ):
            continue
        assessed = _assess(subject, used, option, rules, memory_measured=memory_measured)
        if assessed is None:
            continue
        projection, risk, confidence = assessed
        return _Hit(
            Reason.RIGHTSIZE_DOWNSIZE,
            option.instance_type,
            "on-demand",
            option.hourly_usd,
            confidence,
            f"GPU load {_pct(load)}% over {facts.accelerator_count} {facts.accelerator_model} (busiest "
            f"p95 {_pct(used.gpu_p95)}%) and memory fit {o.accelerator_count}: {option.instance_type}, "
            f"{_projected_text(projection)}.",
            {"needed_gpus": needed, "vcpus_needed": round(vcpus_needed, 1)},
            risk=risk,
            projection=projection,
        )
    return None


def _family_hit(
    subject: Subject, used: Usage, catalog: Catalog, rules: Rules, *, load: float, vcpus_needed: float
) -> _Hit | None:
    """The cheapest type of another family (another GPU model) whose GPU memory holds the measured peak, when
    the GPUs are not busy enough to need this one."""
    facts = subject.facts
    assert facts is not None
    family = rules.family
    if used.memory_peak_mib is None or not (used.gpu_p95 or 0.0) <= family.gpu_p95_max_percent:
        return None
    wanted_mib = used.memory_peak_mib * family.memory_headroom
    wanted_total = (used.memory_total_peak_mib or used.memory_peak_mib) * family.memory_headroom
    sagemaker = subject.instance_type.startswith("ml.")
    for option in catalog.in_families(family.families, sagemaker=sagemaker):
        o = option.facts
        if (
            o.family == facts.family
            or o.accelerator_model == facts.accelerator_model
            or o.accelerator_memory_mib < wanted_mib
            or o.total_accelerator_memory_mib < wanted_total
            or o.vcpus < vcpus_needed
        ):
            continue
        assessed = _assess(subject, used, option, rules, memory_measured=True)
        if assessed is None:
            continue
        projection, risk, confidence = assessed
        return _Hit(
            Reason.RIGHTSIZE_FAMILY,
            option.instance_type,
            "on-demand",
            option.hourly_usd,
            confidence,
            f"Peak GPU memory {_gib(used.memory_peak_mib)} GiB of "
            f"{_gib(facts.accelerator_memory_mib)} GiB on a {facts.accelerator_model}, GPU load "
            f"{_pct(load)}%: fits {o.accelerator_count}x {o.accelerator_model} ({option.instance_type}), "
            f"{_projected_text(projection)}.",
            {
                "needed_gpus": o.accelerator_count,
                "target_gpu_memory_gib": _gib(o.accelerator_memory_mib),
            },
            risk=risk,
            projection=projection,
        )
    return None


def parse_params(text: str) -> float | None:
    """A declared model size in billions: "7B", "70b", "1.3e9", "175000000000", "350M"."""
    value = text.strip().lower().replace("_", "").replace(",", "")
    scale = 1.0
    if value.endswith("b"):
        value, scale = value[:-1], 1.0
    elif value.endswith("m"):
        value, scale = value[:-1], 1e-3
    elif value.endswith("t"):
        value, scale = value[:-1], 1e3
    try:
        number = float(value)
    except ValueError:
        return None
    if number <= 0 or math.isnan(number) or math.isinf(number):
        return None
    return number / 1e9 if number >= 1e6 else number * scale


def model_memory_gib(billions: float, workload: str, rules: Rules) -> tuple[float, str, float]:
    """What a model of ``billions`` parameters holds in accelerator memory for ``workload``, with headroom.

    Returns the GiB wanted, the workload it was sized as, and the bytes per parameter assumed.
    """
    size = rules.model_size
    sized_as = workload if workload in size.bytes_per_param else size.undeclared_workload
    per_param = size.bytes_per_param[sized_as]
    return billions * 1e9 * per_param * size.memory_headroom / 2**30, sized_as, per_param


def _tag_hits(
    subject: Subject, used: Usage | None, price: float, catalog: Catalog, rules: Rules
) -> list[_Hit]:
    """The rules that read tags; ``used`` is the measured usage when the window has enough data, else None.

    A declared experiment, else a declared model size; then spot for checkpointed work, and Trainium for long
    transformer training. Each rule proposes at most one target."""
    workload = subject.tags.get(rules.tags.workload, "").strip().lower()
    measured_total = (
        used.memory_total_peak_mib * rules.model_size.memory_headroom
        if used is not None and used.memory_total_peak_mib is not None
        else None
    )
    if workload in rules.model_size.experiment_workloads:
        sized = _experiment_hit(subject, used, catalog, rules, workload, measured_total)
    else:
        sized = _model_size_hit(subject, used, catalog, rules, workload, measured_total)
    hits = [
        sized,
        _spot_hit(subject, used, price, catalog, rules, workload),
        _trainium_hit(subject, used, catalog, rules, workload),
    ]
    return [hit for hit in hits if hit is not None]


def trainium_target(subject: Subject, rules: Rules, workload: str) -> str | None:
    """The Trainium type the Trainium rule would move long transformer training on GPUs to (``ml.`` for
    SageMaker), or None when the rule does not apply to the subject."""
    trainium = rules.trainium
    facts = subject.facts
    if not (
        workload in trainium.workloads
        and subject.running_hours * subject.instance_count >= trainium.min_cumulative_hours
        and facts is not None
        and facts.accelerator_kind != "neuron"
    ):
        return None
    wanted = trainium.single_device_type if facts.accelerator_count <= 1 else trainium.multi_device_type
    return ("ml." if subject.instance_type.startswith("ml.") else "") + wanted


def unoffered_moves(
    subjects: Sequence[Subject], findings: Sequence[AuditFinding], catalog: Catalog, rules: Rules, region: str
) -> list[dict[str, Any]]:
    """The moves a rule names by type that the region does not offer (so nothing is recommended): for each subject
    the Trainium rule would send to its Trainium type, that type when AWS offers it nowhere in ``region``. The
    report lists them, so an audit in a region without the type says why the recommendation is absent."""
    told = {f.subject.key for f in findings if f.reason is Reason.TRAINIUM_CANDIDATE}
    out: list[dict[str, Any]] = []
    for subject in subjects:
        workload = subject.tags.get(rules.tags.workload, "").strip().lower()
        target = None if subject.key in told else trainium_target(subject, rules, workload)
        if target is None:
            continue
        if target not in catalog.by_type and not_offered(target.removeprefix("ml."), region):
            out.append(
                {
                    "id": subject.id,
                    "kind": subject.kind.value,
                    "region": region,
                    "instance_type": subject.instance_type,
                    "reason": Reason.TRAINIUM_CANDIDATE.value,
                    "target": target,
                    "why": f"{target} is not offered in {region}: no {Reason.TRAINIUM_CANDIDATE.value} "
                    "recommendation made",
                }
            )
    return out


def _experiment_hit(
    subject: Subject,
    used: Usage | None,
    catalog: Catalog,
    rules: Rules,
    workload: str,
    measured_total: float | None,
) -> _Hit | None:
    """Declared experiment work: the cheapest single-accelerator type of the experiment families, on spot."""
    size = rules.model_size
    sagemaker = subject.instance_type.startswith("ml.")
    for option in catalog.in_families(size.experiment_families, sagemaker=sagemaker):
        if option.facts.accelerator_count != 1:
            continue
        if measured_total is not None and measured_total > option.facts.total_accelerator_memory_mib:
            continue
        assessed = _assess(subject, used, option, rules, memory_measured=measured_total is not None)
        if assessed is None:
            continue
        projection, risk, confidence = assessed
        after = round(option.hourly_usd * (1 - size.experiment_spot_discount), 4)
        return _Hit(
            Reason.RIGHTSIZE_MODEL_SIZE,
            option.instance_type,
            "spot",
            after,
            _lower(confidence, "medium"),  # the spot discount is assumed
            f"Declared {workload} work: a small instance on spot ({option.instance_type}), "
            f"{_projected_text(projection)}.",
            {"workload": workload, "assumed_spot_discount": size.experiment_spot_discount},
            risk=_worse(risk, "medium"),  # spot capacity can be reclaimed
            projection=projection,
        )
    return None


def _model_size_hit(
    subject: Subject,
    used: Usage | None,
    catalog: Catalog,
    rules: Rules,
    workload: str,
    measured_total: float | None,
) -> _Hit | None:
    """A declared model size whose band of families does not hold this type: the cheapest type of the band with
    the accelerator memory the model wants (and the measured peak, when there is one)."""
    size = rules.model_size
    declared = subject.tags.get(rules.tags.model_params)
    if not declared or (billions := parse_params(declared)) is None:
        return None
    band = next(b for b in size.bands if b.up_to_billion is None or billions <= b.up_to_billion)
    if family_of(subject.instance_type) in band.families:
        return None
    wanted_gib, sized_as, per_param = model_memory_gib(billions, workload, rules)
    wanted_mib = wanted_gib * MIB_PER_GIB
    assumption = _sizing_assumption(workload, sized_as, per_param, wanted_gib, rules)
    sagemaker = subject.instance_type.startswith("ml.")
    for option in catalog.in_families(band.families, sagemaker=sagemaker):
        o = option.facts
        if o.total_accelerator_memory_mib < wanted_mib:
            continue
        if measured_total is not None and measured_total > o.total_accelerator_memory_mib:
            continue
        # Memory is sized from a declared size and a per-workload rule of thumb, not measured: at most
        # medium confidence.
        assessed = _assess(subject, used, option, rules, memory_measured=False)
        if assessed is None:
            continue
        projection, risk, confidence = assessed
        return _Hit(
            Reason.RIGHTSIZE_MODEL_SIZE,
            option.instance_type,
            "on-demand",
            option.hourly_usd,
            confidence,
            f"A {billions:g}B-parameter model ({assumption}) belongs on "
            f"{'/'.join(band.families)} class instances: {option.instance_type} "
            f"({o.accelerator_count}x {o.accelerator_model}), {_projected_text(projection)}.",
            {
                "model_params_billion": billions,
                "band_families": list(band.families),
                "model_memory_gib": round(wanted_gib, 1),
                "workload": workload or None,
                "sized_as_workload": sized_as,
                "bytes_per_param": per_param,
                "assumption": assumption,
            },
            risk=risk,
            projection=projection,
        )
    return None


def _sizing_assumption(
    workload: str, sized_as: str, per_param: float, wanted_gib: float, rules: Rules
) -> str:
    """How a declared model's memory was sized, as the finding says it."""
    if sized_as == workload:
        said = f"declared workload {workload}"
    elif workload:
        said = f"workload {workload!r} has no memory rule, sized as {sized_as}"
    else:
        said = f"no workload declared ({rules.tags.workload}), sized as {sized_as}"
    return (
        f"{said}: {per_param:g} bytes per parameter x {rules.model_size.memory_headroom:g} headroom "
        f"= {wanted_gib:.1f} GiB"
    )


def _spot_hit(
    subject: Subject, used: Usage | None, price: float, catalog: Catalog, rules: Rules, workload: str
) -> _Hit | None:
    """Checkpointed work of a spot-friendly kind, long on on-demand: the same type on spot."""
    spot = rules.spot
    checkpointed = subject.checkpointed or rules.tags.checkpoint in subject.tags
    current = catalog.by_type.get(subject.instance_type)
    if not (
        not subject.spot
        and workload in spot.workloads
        and checkpointed
        and subject.running_hours >= spot.min_running_hours
    ):
        return None
    same = current or (
        TypeOption(facts=subject.facts, instance_type=subject.instance_type, hourly_usd=price)
        if subject.facts
        else None
    )
    assessed = _assess(subject, used, same, rules, memory_measured=True)
    if assessed is None:
        return None
    projection, risk, confidence = assessed
    sagemaker = subject.instance_type.startswith("ml.")
    return _Hit(
        Reason.RIGHTSIZE_SPOT,
        subject.instance_type,
        "spot",
        round(price * (1 - spot.discount), 4),
        _lower(confidence, "medium"),  # the discount is assumed
        f"Checkpointed {workload} running {subject.running_hours:g} h on on-demand: "
        f"{'managed spot training' if sagemaker else 'spot'} at an assumed "
        f"{spot.discount:.0%} discount, {_projected_text(projection)}.",
        {"running_hours": subject.running_hours, "assumed_spot_discount": spot.discount},
        risk=_worse(risk, "medium"),  # interruptions cost the work since the last checkpoint
        projection=projection,
    )


def _trainium_hit(
    subject: Subject, used: Usage | None, catalog: Catalog, rules: Rules, workload: str
) -> _Hit | None:
    """Long transformer training on GPUs: the Trainium type of its size (the code must be ported first)."""
    trainium = rules.trainium
    cumulative = subject.running_hours * subject.instance_count
    wanted = trainium_target(subject, rules, workload)
    if wanted is None:
        return None
    trn = catalog.by_type.get(wanted)
    assessed = _assess(subject, used, trn, rules, memory_measured=False) if trn is not None else None
    if trn is None or assessed is None:
        return None
    projection, risk, _ = assessed
    return _Hit(
        Reason.TRAINIUM_CANDIDATE,
        trn.instance_type,
        "on-demand",
        trn.hourly_usd,
        "low",  # the code must be ported and validated first
        f"Transformer training with {cumulative:g} instance-hours so far: "
        f"{trn.instance_type} ({trn.facts.accelerator_count} Trainium), "
        f"{_projected_text(projection)}. {trainium.caveat}",
        {"cumulative_hours": cumulative, "caveat": trainium.caveat},
        risk=_worse(risk, "medium"),
        projection=projection,
    )
