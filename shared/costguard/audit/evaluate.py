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

from costguard.audit.model import AuditFinding, Subject, TypeOption, Usage, family_of
from costguard.audit.rules import Rules
from costguard.model import Reason

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


@dataclass(frozen=True)
class Skipped:
    """A subject the audit could not judge, and why (unpriced type, too little data)."""

    subject: Subject
    why: str


def evaluate(
    subjects: Sequence[Subject], usage: Mapping[str, Usage], catalog: Catalog, rules: Rules
) -> tuple[list[AuditFinding], list[Skipped]]:
    findings: list[AuditFinding] = []
    skipped: list[Skipped] = []
    for subject in subjects:
        price = catalog.prices.get(subject.instance_type)
        if price is None:
            skipped.append(Skipped(subject, f"no price known for {subject.instance_type}"))
            continue
        used = usage.get(subject.key)
        judged = used is not None and used.gpu_max is not None and used.coverage >= rules.min_coverage
        hits = [h for h in _tag_hits(subject, price, catalog, rules) if h.hourly_after < price]
        if judged:
            assert used is not None
            hits = [
                h for h in _usage_hits(subject, used, price, catalog, rules) if h.hourly_after < price
            ] + hits
        if not hits:
            if not judged and subject.facts is not None and subject.facts.accelerator_kind != "neuron":
                observed = used.hours_observed if used else 0.0
                skipped.append(Skipped(subject, f"too little GPU data ({observed:g} h observed)"))
            continue
        findings.append(_finding(subject, used, price, hits, rules))
    findings.sort(key=lambda f: (-f.monthly_saving_usd, f.subject.key))
    return findings, skipped


def _finding(
    subject: Subject, used: Usage | None, price: float, hits: list[_Hit], rules: Rules
) -> AuditFinding:
    monthly = price * subject.instance_count * rules.hours_per_month

    def saving(hit: _Hit) -> float:
        return round((price - hit.hourly_after) * subject.instance_count * rules.hours_per_month, 2)

    ranked = sorted(hits, key=lambda h: (-saving(h), _RANK[h.reason]))
    best = ranked[0]
    evidence = dict(best.evidence)
    if used is not None:
        evidence.update(
            {
                "gpu_p50_percent": used.gpu_p50,
                "gpu_p95_percent": used.gpu_p95,
                "gpu_max_percent": used.gpu_max,
                "gpu_memory_peak_gib": _gib(used.memory_peak_mib),
                "cpu_p95_percent": used.cpu_p95,
                "hours_observed": used.hours_observed,
                "window_hours": used.window_hours,
            }
        )
    return AuditFinding(
        reason=best.reason,
        subject=subject,
        summary=best.summary,
        current_hourly_usd=price,
        recommended_type=best.target,
        recommended_market=best.market,
        recommended_hourly_usd=best.hourly_after if best.target else None,
        monthly_cost_usd=round(monthly, 2),
        monthly_saving_usd=saving(best),
        confidence=best.confidence,
        evidence=evidence,
        alternatives=tuple(
            {
                "reason": h.reason.value,
                "recommended_type": h.target,
                "market": h.market,
                "monthly_saving_usd": saving(h),
            }
            for h in ranked[1:]
        ),
        chart=used.chart if used else (),
    )


def _gib(mib: float | None) -> float | None:
    return None if mib is None else round(mib / MIB_PER_GIB, 1)


def _confidence(used: Usage) -> str:
    return "high" if used.coverage >= 0.9 else "medium"


def _usage_hits(subject: Subject, used: Usage, price: float, catalog: Catalog, rules: Rules) -> list[_Hit]:
    assert used.gpu_max is not None
    idle = rules.idle
    if used.gpu_max <= idle.gpu_max_percent and (used.cpu_p95 or 0.0) <= idle.cpu_p95_percent:
        return [
            _Hit(
                Reason.RIGHTSIZE_IDLE,
                None,
                "stop",
                0.0,
                _confidence(used),
                f"No GPU above {used.gpu_max:g}% in {used.hours_observed:g} h: stop it.",
                {},
            )
        ]
    facts = subject.facts
    if facts is None or facts.accelerator_kind not in ("nvidia_gpu", "gpu") or not facts.accelerator_count:
        return []
    hits = []
    per_gpu = used.per_gpu_p95 or ((used.gpu_p95 or 0.0),)
    compute_gpus = math.ceil(sum(per_gpu) / rules.downsize.gpu_target_percent - 1e-9)
    memory_gpus = 0
    if used.memory_total_peak_mib and facts.accelerator_memory_mib:
        memory_gpus = math.ceil(
            used.memory_total_peak_mib * rules.downsize.memory_headroom / facts.accelerator_memory_mib - 1e-9
        )
    needed = max(1, compute_gpus, memory_gpus)
    vcpus_needed = (used.cpu_p95 or 0.0) / 100 * facts.vcpus * rules.downsize.cpu_headroom
    sagemaker = subject.instance_type.startswith("ml.")
    if needed < facts.accelerator_count:
        for option in catalog.in_families([facts.family], sagemaker=sagemaker):
            fits = option.facts.accelerator_count >= needed and option.facts.vcpus >= vcpus_needed
            if fits and option.facts.accelerator_model == facts.accelerator_model:
                hits.append(
                    _Hit(
                        Reason.RIGHTSIZE_DOWNSIZE,
                        option.instance_type,
                        "on-demand",
                        option.hourly_usd,
                        _confidence(used),
                        f"GPU p95 {used.gpu_p95:g}% per GPU and memory fit {needed} of "
                        f"{facts.accelerator_count} GPUs: {option.instance_type}.",
                        {"needed_gpus": needed, "vcpus_needed": round(vcpus_needed, 1)},
                    )
                )
                break
    family = rules.family
    if used.memory_peak_mib is not None and (used.gpu_p95 or 0.0) <= family.gpu_p95_max_percent:
        wanted_mib = used.memory_peak_mib * family.memory_headroom
        for option in catalog.in_families(family.families, sagemaker=sagemaker):
            o = option.facts
            if (
                o.family != facts.family
                and o.accelerator_model != facts.accelerator_model
                and o.accelerator_count >= needed
                and o.accelerator_memory_mib >= wanted_mib
                and o.vcpus >= vcpus_needed
            ):
                hits.append(
                    _Hit(
                        Reason.RIGHTSIZE_FAMILY,
                        option.instance_type,
                        "on-demand",
                        option.hourly_usd,
                        _confidence(used),
                        f"Peak GPU memory {_gib(used.memory_peak_mib)} GiB of "
                        f"{_gib(facts.accelerator_memory_mib)} GiB on a {facts.accelerator_model}: "
                        f"fits {needed}x {o.accelerator_model} ({option.instance_type}).",
                        {"needed_gpus": needed, "target_gpu_memory_gib": _gib(o.accelerator_memory_mib)},
                    )
                )
                break
    return hits


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


def _tag_hits(subject: Subject, price: float, catalog: Catalog, rules: Rules) -> list[_Hit]:
    hits = []
    tags = rules.tags
    workload = subject.tags.get(tags.workload, "").strip().lower()
    sagemaker = subject.instance_type.startswith("ml.")
    size = rules.model_size
    declared = subject.tags.get(tags.model_params)
    if workload in size.experiment_workloads:
        for option in catalog.in_families(size.experiment_families, sagemaker=sagemaker):
            if option.facts.accelerator_count == 1:
                after = round(option.hourly_usd * (1 - size.experiment_spot_discount), 4)
                hits.append(
                    _Hit(
                        Reason.RIGHTSIZE_MODEL_SIZE,
                        option.instance_type,
                        "spot",
                        after,
                        "medium",
                        f"Declared {workload} work: a small instance on spot ({option.instance_type}).",
                        {"workload": workload, "assumed_spot_discount": size.experiment_spot_discount},
                    )
                )
                break
    elif declared and (billions := parse_params(declared)) is not None:
        band = next(b for b in size.bands if b.up_to_billion is None or billions <= b.up_to_billion)
        family = family_of(subject.instance_type)
        if family not in band.families:
            wanted_mib = billions * size.gib_per_billion_params * MIB_PER_GIB * size.memory_headroom
            for option in catalog.in_families(band.families, sagemaker=sagemaker):
                if option.facts.total_accelerator_memory_mib >= wanted_mib:
                    hits.append(
                        _Hit(
                            Reason.RIGHTSIZE_MODEL_SIZE,
                            option.instance_type,
                            "on-demand",
                            option.hourly_usd,
                            "medium",
                            f"A {billions:g}B-parameter model belongs on {'/'.join(band.families)} class "
                            f"instances: {option.instance_type}.",
                            {
                                "model_params_billion": billions,
                                "band_families": list(band.families),
                                "model_memory_gib": round(wanted_mib / MIB_PER_GIB, 1),
                            },
                        )
                    )
                    break
    spot = rules.spot
    checkpointed = subject.checkpointed or tags.checkpoint in subject.tags
    if (
        not subject.spot
        and workload in spot.workloads
        and checkpointed
        and subject.running_hours >= spot.min_running_hours
    ):
        hits.append(
            _Hit(
                Reason.RIGHTSIZE_SPOT,
                subject.instance_type,
                "spot",
                round(price * (1 - spot.discount), 4),
                "medium",
                f"Checkpointed {workload} running {subject.running_hours:g} h on on-demand: "
                f"{'managed spot training' if sagemaker else 'spot'} at an assumed "
                f"{spot.discount:.0%} discount.",
                {"running_hours": subject.running_hours, "assumed_spot_discount": spot.discount},
            )
        )
    trainium = rules.trainium
    cumulative = subject.running_hours * subject.instance_count
    facts = subject.facts
    if (
        workload in trainium.workloads
        and cumulative >= trainium.min_cumulative_hours
        and facts is not None
        and facts.accelerator_kind != "neuron"
    ):
        wanted = trainium.single_device_type if facts.accelerator_count <= 1 else trainium.multi_device_type
        trn = catalog.by_type.get(("ml." if sagemaker else "") + wanted)
        if trn is not None:
            hits.append(
                _Hit(
                    Reason.TRAINIUM_CANDIDATE,
                    trn.instance_type,
                    "on-demand",
                    trn.hourly_usd,
                    "low",
                    f"Transformer training with {cumulative:g} instance-hours so far: "
                    f"{trn.instance_type} ({trn.facts.accelerator_count} Trainium). {trainium.caveat}",
                    {"cumulative_hours": cumulative, "caveat": trainium.caveat},
                )
            )
    return hits
