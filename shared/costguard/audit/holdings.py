"""What the audit reports beside right-sizing (pure): steady usage a Savings Plan would cover
(``commitment_candidate``), storage GPU work left behind (``orphaned_storage``), GPU spend without the account's
cost-allocation tags (``untagged_gpu_spend``), and Compute Optimizer's view of the same instances.

Each section is plain JSON with its rows, built from what Discover and Evaluate read; the report step merges
the (account, region) sections and totals them (holdings_report.py). The rates are the bundled tables'
(pricing/holdings.py), passed into each builder, so nothing here calls AWS.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from costguard.audit.model import AuditFinding, Subject, family_of
from costguard.audit.rules import Rules
from costguard.model import Reason, ResourceKind
from costguard.pricing import holdings as holding_rates

GIB = 2**30
PLANS = (("compute", "1yr"), ("ec2_instance", "1yr"), ("compute", "3yr"), ("ec2_instance", "3yr"))
PLAN_NAMES = {"compute": "Compute Savings Plan", "ec2_instance": "EC2 Instance Savings Plan"}
# rate(on-demand $/h, family, plan, term) -> the plan's $/h, or None for a family without a bundled discount.
PlanRate = Callable[[float, str, str, str], float | None]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True)


class Volume(_Frozen):
    """An EBS volume attached to nothing, as DescribeVolumes describes it."""

    id: str
    volume_type: str
    size_gib: int
    created: datetime | None = None
    availability_zone: str | None = None
    tags: dict[str, str] = Field(default_factory=dict)


class JobPrefix(_Frozen):
    """An S3 prefix a finished training job wrote (its checkpoints or its output), with what it holds now."""

    uri: str
    kind: str  # checkpoint | artifacts
    jobs: tuple[str, ...]
    ended: datetime  # when the last job writing there ended
    objects: int = 0
    bytes_by_class: dict[str, int] = Field(default_factory=dict)
    newest: datetime | None = None
    error: str | None = None  # the listing failed: what it holds is unknown


class Holdings(_Frozen):
    """What Discover found besides running resources: unattached volumes and finished jobs' prefixes."""

    volumes: tuple[Volume, ...] = ()
    prefixes: tuple[JobPrefix, ...] = ()


def by_cost(row: Mapping[str, Any]) -> tuple[float, str]:
    """Sort key: the costliest row first (an unpriced one as nothing), then by id."""
    return -(row["monthly_cost_usd"] or 0.0), row["id"]


# -- commitment_candidate ------------------------------------------------------------------------------------


def _steady_by_type(
    subjects: Sequence[Subject], window_hours: float, rules: Rules, exclude: frozenset[str]
) -> dict[str, list[Subject]]:
    """The on-demand EC2 instances that ran at least ``min_share`` of the window, by type."""
    steady: dict[str, list[Subject]] = defaultdict(list)
    for subject in subjects:
        if subject.kind is not ResourceKind.EC2_INSTANCE or subject.spot or subject.id in exclude:
            continue
        if min(subject.running_hours, window_hours) >= rules.commitment.min_share * window_hours:
            steady[subject.instance_type].append(subject)
    return steady


def commitments(
    subjects: Sequence[Subject],
    prices: Mapping[str, float],
    covered: Mapping[str, float] | None,
    *,
    window_hours: float,
    rules: Rules,
    rate: PlanRate,
    exclude: frozenset[str] = frozenset(),
) -> list[dict[str, Any]]:
    """One ``commitment_candidate`` per EC2 type with steady on-demand usage: the average instances it ran over
    the window (instance-hours / window hours), less the share Savings Plans already cover in its family
    (``covered``: family -> share; None, or no entry for the family: unknown, nothing is taken as covered), priced
    under each plan. The headline saving is ``rules.commitment``'s plan and term. ``exclude``: instances the
    audit tells to stop, resize or move (any finding): a commitment is sized on the fleet as it would be after
    the report's own advice, and must not pay for what that advice removes."""
    rows = []
    for instance_type, steady in sorted(_steady_by_type(subjects, window_hours, rules, exclude).items()):
        on_demand = prices.get(instance_type)
        family = family_of(instance_type)
        if on_demand is None or rate(on_demand, family, "compute", "1yr") is None:
            continue
        instance_hours = sum(min(s.running_hours, window_hours) * s.instance_count for s in steady)
        average = instance_hours / window_hours
        share = (covered or {}).get(family, 0.0)
        uncovered = average * (1 - share)
        if uncovered <= 0:
            continue
        options = []
        for plan, term in PLANS:
            plan_rate = rate(on_demand, family, plan, term)
            if plan_rate is None:
                continue
            options.append(
                {
                    "plan": plan,
                    "term": term,
                    "rate_usd_per_hour": plan_rate,
                    "commitment_usd_per_hour": round(uncovered * plan_rate, 4),
                    "monthly_saving_usd": round(
                        uncovered * (on_demand - plan_rate) * rules.hours_per_month, 2
                    ),
                }
            )
        wanted = (rules.commitment.plan, rules.commitment.term)
        headline = next((o for o in options if (o["plan"], o["term"]) == wanted), options[0])
        rows.append(
            _commitment_row(
                instance_type,
                steady,
                on_demand,
                headline,
                options,
                average=average,
                share=share,
                uncovered=uncovered,
                instance_hours=instance_hours,
                window_hours=window_hours,
                monthly_on_demand_usd=round(uncovered * on_demand * rules.hours_per_month, 2),
                # Cost Explorer returns a row for every family with EC2 spend, covered or not: none for this
                # family (a hub that cannot see the account's costs) leaves its coverage unknown.
                coverage_known=covered is not None and family in covered,
            )
        )
    return sorted(rows, key=lambda r: -r["monthly_saving_usd"])


def _commitment_row(
    instance_type: str,
    steady: Sequence[Subject],
    on_demand: float,
    headline: dict[str, Any],
    options: list[dict[str, Any]],
    *,
    average: float,
    share: float,
    uncovered: float,
    instance_hours: float,
    window_hours: float,
    monthly_on_demand_usd: float,
    coverage_known: bool,
) -> dict[str, Any]:
    first = steady[0]
    plan = PLAN_NAMES[headline["plan"]]
    covered_text = f", {share:.0%} already covered by Savings Plans" if share else ""
    unknown_text = "" if coverage_known else " Savings Plans coverage unknown: none taken as covered."
    return {
        "reason": Reason.COMMITMENT_CANDIDATE.value,
        "account": first.account,
        "region": first.region,
        "instance_type": instance_type,
        "family": family_of(instance_type),
        "resources": sorted(s.id for s in steady),
        "average_instances": round(average, 2),
        "covered_share": round(share, 4),
        "uncovered_instances": round(uncovered, 2),
        "on_demand_usd_per_hour": on_demand,
        "plan": headline["plan"],
        "term": headline["term"],
        "payment": "no upfront",
        "rate_usd_per_hour": headline["rate_usd_per_hour"],
        "commitment_usd_per_hour": headline["commitment_usd_per_hour"],
        "monthly_saving_usd": headline["monthly_saving_usd"],
        "options": options,
        "summary": (
            f"{average:.2f} {instance_type} ran steadily over the window{covered_text}: a {headline['term']} "
            f"{plan} (no upfront) of ${headline['commitment_usd_per_hour']:,.4f}/h would cover the rest at "
            f"${headline['rate_usd_per_hour']:,.4f}/h instead of ${on_demand:,.4f}/h (estimated rate)."
            f"{unknown_text}"
        ),
        "instance_hours": round(instance_hours, 1),
        "window_hours": window_hours,
        "monthly_on_demand_usd": monthly_on_demand_usd,
        "coverage_known": coverage_known,
    }


def left_out(
    subjects: Sequence[Subject],
    findings: Sequence[AuditFinding],
    prices: Mapping[str, float],
    *,
    window_hours: float,
    rules: Rules,
) -> list[dict[str, Any]]:
    """The steady on-demand EC2 instances the commitments leave out because this report tells them to stop,
    resize or move: commit for their new type once it has run steadily, not before."""
    advised = {f.subject.id: f for f in findings if f.subject.kind is ResourceKind.EC2_INSTANCE}
    steady = _steady_by_type(subjects, window_hours, rules, frozenset())
    rows = []
    for instance_type, members in sorted(steady.items()):
        for subject in members:
            finding = advised.get(subject.id)
            if finding is None:
                continue
            target = finding.recommended_type
            rows.append(
                {
                    "id": subject.id,
                    "name": subject.name,
                    "account": subject.account,
                    "region": subject.region,
                    "instance_type": instance_type,
                    "on_demand_usd_per_hour": prices.get(instance_type),
                    "reason": finding.reason.value,
                    "advice": "stop" if target is None else f"{target} ({finding.recommended_market})",
                }
            )
    return rows


# -- orphaned_storage ----------------------------------------------------------------------------------------


def _volume_source(volume: Volume, rules: Rules, accelerated: Callable[[str], bool]) -> str | None:
    """The GPU or accelerator type a volume's tags say it served, or None."""
    for key in rules.storage.volume_type_tags:
        value = volume.tags.get(key, "").strip()
        if value and accelerated(value):
            return value
    return None


def orphaned_volumes(
    volumes: Iterable[Volume],
    *,
    region: str,
    account: str | None,
    now: datetime,
    rules: Rules,
    accelerated: Callable[[str], bool],
    gb_month: Callable[[str], float | None],
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The unattached volumes a tag ties to a GPU or accelerator type, created ``min_age_days`` ago or more,
    with their monthly cost; and what the other unattached volumes cost (not attributed, not rows)."""
    cutoff = now - timedelta(days=rules.storage.min_age_days)
    rows: list[dict[str, Any]] = []
    others = {"volumes": 0, "size_gib": 0, "monthly_cost_usd": 0.0}
    for volume in volumes:
        rate = gb_month(volume.volume_type)
        cost = None if rate is None else round(volume.size_gib * rate, 2)
        source = _volume_source(volume, rules, accelerated)
        if source is None or (volume.created is not None and volume.created > cutoff):
            others["volumes"] += 1
            others["size_gib"] += volume.size_gib
            others["monthly_cost_usd"] = round(others["monthly_cost_usd"] + (cost or 0.0), 2)
            continue
        age = None if volume.created is None else round((now - volume.created).total_seconds() / 86400, 1)
        rows.append(
            {
                "reason": Reason.ORPHANED_STORAGE.value,
                "kind": "ebs_volume",
                "id": volume.id,
                "account": account,
                "region": region,
                "volume_type": volume.volume_type,
                "size_gib": volume.size_gib,
                "served": source,
                "age_days": age,
                "monthly_cost_usd": cost,
                "summary": (
                    f"{volume.size_gib} GiB {volume.volume_type} volume from a {source}, attached to nothing"
                    + (f", created {age:g} days ago" if age is not None else "")
                ),
            }
        )
    return rows, others


def orphaned_prefixes(
    prefixes: Iterable[JobPrefix],
    *,
    region: str,
    account: str | None,
    now: datetime,
    rules: Rules,
    gb_month: Callable[[str], float | None],
) -> list[dict[str, Any]]:
    """The prefixes of jobs that ended ``min_age_days`` ago or more and that nothing wrote to since, with what
    they hold and cost a month (storage classes without a bundled rate are counted, not priced)."""
    cutoff = now - timedelta(days=rules.storage.min_age_days)
    rows = []
    for prefix in prefixes:
        if prefix.ended > cutoff or (prefix.newest is not None and prefix.newest > cutoff):
            continue
        if prefix.error is None and not prefix.objects:
            continue  # already emptied
        priced = unpriced = 0
        cost = 0.0
        for storage_class, size in prefix.bytes_by_class.items():
            rate = gb_month(storage_class)
            if rate is None:
                unpriced += size
            else:
                priced += size
                cost += size / GIB * rate
        size_gib = round((priced + unpriced) / GIB, 2)
        age = round((now - prefix.ended).total_seconds() / 86400, 1)
        rows.append(
            {
                "reason": Reason.ORPHANED_STORAGE.value,
                "kind": f"s3_{prefix.kind}",
                "id": prefix.uri,
                "account": account,
                "region": region,
                "jobs": list(prefix.jobs),
                "objects": prefix.objects,
                "size_gib": size_gib,
                "unpriced_gib": round(unpriced / GIB, 2),
                "age_days": age,
                "monthly_cost_usd": None if prefix.error else round(cost, 2),
                "error": prefix.error,
                "summary": (
                    f"{prefix.kind} of {', '.join(prefix.jobs[:3])}"
                    + (f" and {len(prefix.jobs) - 3} more" if len(prefix.jobs) > 3 else "")
                    + f", ended {age:g} days ago: "
                    + (
                        f"not listed ({prefix.error})"
                        if prefix.error
                        else f"{prefix.objects} object{'' if prefix.objects == 1 else 's'}, {size_gib:g} GiB"
                    )
                ),
            }
        )
    return rows


# -- untagged_gpu_spend --------------------------------------------------------------------------------------


def untagged(
    subjects: Iterable[Subject],
    prices: Mapping[str, float],
    required: Sequence[str],
    *,
    hours_per_month: float,
    team_tag: str,
    hours_of: Callable[[Subject], float] | None = None,
) -> list[dict[str, Any]]:
    """Every GPU or accelerator resource lacking one of the ``required`` tags (an empty value counts as
    missing), with what it costs at its current price over ``hours_of`` it (default: a month; the audit's own
    basis: what a job or anything that did not run the whole window spent over it); None: no price known."""
    rows = []
    for subject in subjects:
        missing = [key for key in required if not str(subject.tags.get(key, "")).strip()]
        if not missing:
            continue
        hourly = prices.get(subject.instance_type)
        hours = hours_per_month if hours_of is None else hours_of(subject)
        monthly = None if hourly is None else round(hourly * subject.instance_count * hours, 2)
        rows.append(
            {
                "reason": Reason.UNTAGGED_GPU_SPEND.value,
                "kind": subject.kind.value,
                "id": subject.id,
                "name": subject.name,
                "account": subject.account,
                "region": subject.region,
                "team": subject.tags.get(team_tag) or None,
                "instance_type": subject.instance_type,
                "instance_count": subject.instance_count,
                "missing_tags": missing,
                "monthly_cost_usd": monthly,
                "cost_basis": "month" if hours == hours_per_month else "window",
                "cost_hours": hours,
            }
        )
    return sorted(rows, key=by_cost)


# -- Compute Optimizer alongside -----------------------------------------------------------------------------


def _costguard_view(finding: AuditFinding | None) -> tuple[str, str | None]:
    """What costguard says of an instance: (direction, target type)."""
    if finding is None:
        return "keep", None
    if finding.recommended_type is None:
        return "stop", None
    if finding.recommended_type == finding.subject.instance_type:
        return "keep", finding.recommended_type  # the same type on spot: no change of size
    if finding.current_hourly_usd is None:  # price unknown: fewer GPUs of the same model is all it says
        return (
            "smaller" if finding.reason is Reason.RIGHTSIZE_DOWNSIZE else "other"
        ), finding.recommended_type
    if (
        finding.recommended_hourly_usd is not None
        and finding.recommended_hourly_usd < finding.current_hourly_usd
    ):
        return "smaller", finding.recommended_type
    return "other", finding.recommended_type


def _optimizer_view(recommendation: Mapping[str, Any]) -> tuple[str, str | None, float | None]:
    """What Compute Optimizer says: (direction, its top-ranked type, its estimated monthly saving)."""
    options = sorted(recommendation.get("recommendationOptions") or [], key=lambda o: o.get("rank", 99))
    top = options[0] if options else {}
    saving = ((top.get("savingsOpportunity") or {}).get("estimatedMonthlySavings") or {}).get("value")
    finding = str(recommendation.get("finding") or "")
    if str(recommendation.get("idle") or "").lower() == "true":
        direction = "stop"
    else:
        direction = {"Optimized": "keep", "Overprovisioned": "smaller", "Underprovisioned": "larger"}.get(
            finding, "other"
        )
    return direction, top.get("instanceType"), None if saving is None else float(saving)


def _agreement(ours: tuple[str, str | None], theirs: tuple[str, str | None]) -> tuple[str, str]:
    (direction, target), (their_direction, their_target) = ours, theirs
    if direction == their_direction and (direction in ("keep", "stop") or target == their_target):
        return "agree", "both say the same"
    if {direction, their_direction} <= {"stop", "smaller"}:
        return "same direction", "both would spend less, on different targets"
    return (
        "disagree",
        f"costguard: {_said(direction, target)}; Compute Optimizer: {_said(their_direction, their_target)}",
    )


def _said(direction: str, target: str | None) -> str:
    """One side's recommendation in words, with its own target."""
    if direction == "keep":
        return "keep it as it is"
    if direction == "stop":
        return "stop it"
    if direction == "larger":
        return "move to a larger type"
    return f"move to {target}" if target else "change its type"


def optimizer_comparison(
    subjects: Iterable[Subject],
    findings: Iterable[AuditFinding],
    recommendations: Iterable[Mapping[str, Any]],
    *,
    unavailable: str | None = None,
) -> dict[str, Any]:
    """Per EC2 GPU instance, costguard's recommendation beside Compute Optimizer's, and whether they agree."""
    by_id = {f.subject.id: f for f in findings if f.subject.kind is ResourceKind.EC2_INSTANCE}
    theirs = {str(r.get("instanceArn", "")).rsplit("/", 1)[-1]: r for r in recommendations}
    rows, without = [], []
    for subject in subjects:
        if subject.kind is not ResourceKind.EC2_INSTANCE:
            continue
        recommendation = theirs.get(subject.id)
        if recommendation is None:
            without.append(subject.id)
            continue
        finding = by_id.get(subject.id)
        ours = _costguard_view(finding)
        direction, target, saving = _optimizer_view(recommendation)
        verdict, why = _agreement(ours, (direction, target))
        rows.append(
            {
                "id": subject.id,
                "name": subject.name,
                "account": subject.account,
                "region": subject.region,
                "current_type": subject.instance_type,
                "costguard": {
                    "reason": finding.reason.value if finding else None,
                    "direction": ours[0],
                    "recommended_type": ours[1],
                    "monthly_saving_usd": finding.monthly_saving_usd if finding else 0.0,
                },
                "compute_optimizer": {
                    "finding": recommendation.get("finding"),
                    "direction": direction,
                    "recommended_type": target,
                    "monthly_saving_usd": saving,
                },
                "verdict": verdict,
                "why": why,
            }
        )
    return {"rows": rows, "without_recommendation": sorted(without), "unavailable": unavailable}


# -- one (account, region) -----------------------------------------------------------------------------------


def region_sections(
    holdings: Holdings,
    subjects: Sequence[Subject],
    findings: Sequence[AuditFinding],
    prices: Mapping[str, float],
    *,
    region: str,
    account: str | None,
    now: datetime,
    window_hours: float,
    rules: Rules,
    coverage: tuple[Mapping[str, float] | None, str | None],
    recommendations: tuple[Sequence[Mapping[str, Any]], str | None],
    required_tags: Sequence[str],
    team_tag: str,
    accelerated: Callable[[str], bool],
    hours_of: Callable[[Subject], float] | None = None,
) -> dict[str, Any]:
    """An (account, region)'s commitments, orphaned storage, untagged GPU spend and Compute Optimizer comparison,
    as its result.json carries them. ``coverage``: Cost Explorer's covered share per family (None: unknown) and
    why it could not say; ``recommendations``: Compute Optimizer's for the region's EC2 instances, and why it
    could not answer. The sections' totals are the report's (holdings_report.py), over every region."""
    covered, coverage_note = coverage
    recommended, unavailable = recommendations
    volumes, others = orphaned_volumes(
        holdings.volumes,
        region=region,
        account=account,
        now=now,
        rules=rules,
        accelerated=accelerated,
        gb_month=lambda kind: holding_rates.ebs_gb_month(kind, region),
    )
    prefixes = orphaned_prefixes(
        holdings.prefixes,
        region=region,
        account=account,
        now=now,
        rules=rules,
        gb_month=lambda kind: holding_rates.s3_gb_month(kind, region),
    )
    advised = frozenset(f.subject.id for f in findings)
    return {
        "commitments": {
            "rows": commitments(
                subjects,
                prices,
                covered,
                window_hours=window_hours,
                rules=rules,
                rate=holding_rates.savings_plan_rate,
                exclude=advised,
            ),
            "left_out": left_out(subjects, findings, prices, window_hours=window_hours, rules=rules),
            "coverage_note": coverage_note,
            "assumptions": holding_rates.savings_plan_assumptions(),
        },
        "orphaned_storage": {
            "rows": [*volumes, *prefixes],
            "other_unattached_volumes": others,
            "rates": holding_rates.storage_source(),
        },
        "untagged": {
            "required_tags": list(required_tags),
            "rows": untagged(
                subjects,
                prices,
                required_tags,
                hours_per_month=rules.hours_per_month,
                team_tag=team_tag,
                hours_of=hours_of,
            ),
        },
        "compute_optimizer": optimizer_comparison(subjects, findings, recommended, unavailable=unavailable),
    }
