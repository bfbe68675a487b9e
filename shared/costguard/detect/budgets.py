"""Budget breaches and cost anomalies: read the alert, rank what runs by $/h, decide what to stop. Pure."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from costguard.detect.escalation import AlertType, Escalation, Level
from costguard.model import Finding, Reason, Resource, ResourceKind
from costguard.policy import is_protected, marked_at

if TYPE_CHECKING:
    # The cost anomaly's models (pydantic): only the budgets function parses one. The sweeps that import this
    # module for the budget marks (flows/gpu.py, flows/sagemaker.py) need not build them at their cold start.
    from costguard.events.budgets import Anomaly, RootCause

# -- reading an AWS Budgets message ---------------------------------------------------------------

_MONEY = re.compile(r"\$\s*(-?[0-9][0-9,]*(?:\.[0-9]+)?)")
_PERCENT = re.compile(r"([0-9]+(?:\.[0-9]+)?)\s*%")
_ACCOUNT = re.compile(r"\bAWS Account\s*:?\s*(\d{12})\b", re.IGNORECASE)
_SUBJECT_NAME = re.compile(r"AWS Budgets:\s*(.+?)\s+has (?:exceeded|been exceeded|reached)", re.IGNORECASE)
_SENTENCE_TYPE = re.compile(r"\bthe (ACTUAL|FORECASTED) (?:Cost|Usage)\b", re.IGNORECASE)


class BudgetMessageError(ValueError):
    """The message does not read as an AWS Budgets alert; the text says what was missing."""


@dataclass(frozen=True)
class BudgetAlert:
    """What one AWS Budgets notification says."""

    name: str
    alert_type: AlertType
    budget_type: str | None = None
    budgeted_usd: float | None = None
    threshold_usd: float | None = None
    threshold_percent: float | None = None
    amount_usd: float | None = None  # the ACTUAL or FORECASTED amount the alert reports
    account: str | None = None

    @property
    def percent(self) -> float | None:
        """How far into the budget the alert is: the reported amount, else its threshold, over the budget."""
        if self.budgeted_usd:
            for value in (self.amount_usd, self.threshold_usd):
                if value is not None:
                    return round(value / self.budgeted_usd * 100, 1)
        return self.threshold_percent

    @property
    def key(self) -> str:
        """One alert of one budget: a FORECASTED and an ACTUAL alert are two pieces of news."""
        threshold = f"{self.threshold_usd:g}" if self.threshold_usd is not None else "?"
        return f"{self.name}/{self.alert_type.value}>{threshold}"


def money(text: str) -> float | None:
    found = _MONEY.search(text)
    return float(found.group(1).replace(",", "")) if found else None


def parse_budget_message(message: str, subject: str | None = None) -> BudgetAlert:
    """Read the "Key: value" lines AWS Budgets writes, in any order, ignoring lines it does not know.

    Wording varies (daily budgets, "(80.0% of your budget)", usage budgets): only the budget name and the
    alert type are required; the name falls back to the subject, the type to the opening sentence.
    """
    fields: dict[str, str] = {}
    for line in message.splitlines():
        key, sep, value = line.partition(":")
        if sep and value.strip() and len(key) <= 40:
            fields.setdefault(" ".join(key.lower().split()), value.strip())
    name = fields.get("budget name")
    if not name and subject:
        found = _SUBJECT_NAME.search(subject)
        name = found.group(1) if found else None
    raw_type = fields.get("alert type", "")
    if not raw_type:
        sentence = _SENTENCE_TYPE.search(message)
        raw_type = sentence.group(1) if sentence else ""
    missing = [what for what, value in (("Budget Name", name), ("Alert Type", raw_type)) if not value]
    if missing:
        raise BudgetMessageError(f"no {' and no '.join(missing)} line")
    try:
        alert_type = AlertType(raw_type.strip().upper().split()[0])
    except ValueError:
        raise BudgetMessageError(f"unknown Alert Type {raw_type!r}") from None
    threshold_text = fields.get("alert threshold", "")
    percent = _PERCENT.search(threshold_text)
    account = _ACCOUNT.search(message)
    assert name is not None
    return BudgetAlert(
        name=name,
        alert_type=alert_type,
        budget_type=fields.get("budget type"),
        budgeted_usd=money(fields.get("budgeted amount", "")),
        threshold_usd=money(threshold_text),
        threshold_percent=float(percent.group(1)) if percent else None,
        amount_usd=money(fields.get(f"{alert_type.value.lower()} amount", "")),
        account=account.group(1) if account else None,
    )


# -- what runs, and in what order ----------------------------------------------------------------

# Busiest last: idle first, then what cannot be judged, then starved, then busy.
_BUSYNESS = {"idle": 0, "no_metrics": 1, "too_early": 1, "unknown": 1, "starved": 2, "busy": 3}
_STOPPABLE = {ResourceKind.EC2_INSTANCE, ResourceKind.TRAINING_JOB, ResourceKind.NOTEBOOK}


@dataclass(frozen=True)
class Running:
    """A GPU or accelerator resource running now, what it costs and how busy it is."""

    resource: Resource
    hourly_usd: float | None
    verdict: str  # idle | starved | busy | no_metrics | too_early | unknown
    detail: str = ""  # e.g. "8 x A100", "2 hosts"

    @property
    def stoppable(self) -> bool:
        return self.resource.kind in _STOPPABLE and self.resource.stop_blocker is None


def ranked(resources: Iterable[Running]) -> list[Running]:
    """Costliest per hour first; an unknown price goes last, never counted as zero."""
    return sorted(
        resources,
        key=lambda r: (r.hourly_usd is None, -(r.hourly_usd or 0.0), r.resource.kind.value, r.resource.id),
    )


def busiest_last(resources: Iterable[Running]) -> list[Running]:
    """The order stops are made in: idle before busy, and the costliest first within each."""
    return sorted(
        resources, key=lambda r: (_BUSYNESS.get(r.verdict, 1), r.hourly_usd is None, -(r.hourly_usd or 0.0))
    )


@dataclass(frozen=True)
class Scope:
    """The tags that mark a budget's resources (any one of them); empty: every resource of the account."""

    tags: tuple[tuple[str, str], ...] = ()
    known: bool = True  # False: the budget could not be read, so which resources it covers is not known
    # An organization's budget filtered on linked accounts: only theirs (empty: every account it is asked about)
    accounts: tuple[str, ...] = ()

    def covers(self, resource: Resource) -> bool:
        if self.accounts and resource.account not in self.accounts:
            return False
        return not self.tags or any(resource.tags.get(key) == value for key, value in self.tags)

    def describe(self) -> str:
        if not self.known:
            return "unknown (the budget could not be read), so every GPU resource of the account is listed"
        where = f" in linked accounts {', '.join(self.accounts)}" if self.accounts else ""
        return (
            " or ".join(f"{k}={v}" for k, v in self.tags) + where
            if self.tags
            else ("every GPU resource" + where if where else "every GPU resource of the account")
        )


def scope_from_budget(budget: dict[str, object]) -> Scope:
    """The tag filter of a DescribeBudget answer: legacy CostFilters.TagKeyValue ("user:team$ml") or a
    FilterExpression on Tags. Anything else (services, accounts) does not narrow which resources run."""
    pairs: list[tuple[str, str]] = []
    filters = budget.get("CostFilters")
    if isinstance(filters, dict):
        for entry in filters.get("TagKeyValue") or []:
            key, sep, value = str(entry).partition("$")
            if sep and value:
                pairs.append((key.removeprefix("user:"), value))
    accounts: list[str] = []
    if isinstance(filters, dict):
        accounts += [str(a) for a in filters.get("LinkedAccount") or []]
    expression = budget.get("FilterExpression")
    if isinstance(expression, dict) and isinstance(expression.get("Tags"), dict):
        tags = expression["Tags"]
        key = str(tags.get("Key", "")).removeprefix("user:")
        pairs += [(key, str(v)) for v in tags.get("Values") or [] if key and v]
    if isinstance(expression, dict) and isinstance(expression.get("Dimensions"), dict):
        dimension = expression["Dimensions"]
        if dimension.get("Key") == "LINKED_ACCOUNT":
            accounts += [str(v) for v in dimension.get("Values") or []]
    linked = tuple(dict.fromkeys(a for a in accounts if len(a) == 12 and a.isascii() and a.isdigit()))
    return Scope(tuple(dict.fromkeys(pairs)), accounts=linked)


def _money(value: float | None, suffix: str = "") -> str:
    return "unknown" if value is None else f"${value:,.2f}{suffix}"


def total_hourly(resources: Sequence[Running]) -> float | None:
    """The sum of known prices; None when nothing is priced."""
    known = [r.hourly_usd for r in resources if r.hourly_usd is not None]
    return round(sum(known), 4) if known else None


def _where(resource: Resource) -> str:
    """An organization's resource says whose account and which region it runs in."""
    if resource.account_name is None:
        return ""
    return f" ({resource.account_name} {resource.account}, {resource.region})"


def listing(resources: Sequence[Running], protect_tag_key: str, limit: int = 15) -> str:
    lines = []
    for n, r in enumerate(resources[:limit], 1):
        res = r.resource
        notes = []
        if is_protected(res.tags, protect_tag_key):
            notes.append("protected")
        if res.stop_blocker:
            notes.append(f"not stoppable: {res.stop_blocker}")
        elif res.kind not in _STOPPABLE:
            notes.append("never stopped by costguard")
        extra = f" ({'; '.join(notes)})" if notes else ""
        lines.append(
            f"{n}. {_money(r.hourly_usd, '/h')} {res.kind.value} {res.display_name}{_where(res)} "
            f"[{res.instance_type or '?'} x {res.instance_count}{', ' + r.detail if r.detail else ''}] "
            f"{r.verdict}{extra}"
        )
    if len(resources) > limit:
        lines.append(f"... and {len(resources) - limit} more")
    return "\n".join(lines) or "nothing GPU or accelerator is running"


# -- budget breaches -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Breach:
    """One budget alert, the level it reached and the resources in its scope."""

    alert: BudgetAlert
    level: Level | None
    scope: Scope
    account: str
    region: str
    observed_at: datetime
    event_id: str | None = None
    running: tuple[Running, ...] = field(default_factory=tuple)
    check: str = ""  # what AWS Budgets itself reports, or why the alert is reported only
    confirmed: bool = True  # False: the budget does not bear the message out, so nothing may be stopped
    unreachable: tuple[str, ...] = ()  # an organization's accounts and regions that could not be read

    @property
    def escalation(self) -> Escalation:
        return self.level.escalation if self.level and self.confirmed else Escalation.NOTIFY

    def headline(self) -> str:
        a = self.alert
        percent = f" ({a.percent:g}% of {_money(a.budgeted_usd)})" if a.percent is not None else ""
        amount = (
            f"{a.alert_type.value} {_money(a.amount_usd)}" if a.amount_usd is not None else a.alert_type.value
        )
        threshold = f", alert threshold {_money(a.threshold_usd)}" if a.threshold_usd is not None else ""
        return f"Budget {a.name}: {amount}{percent}{threshold}."

    def level_text(self) -> str:
        check = f"{self.check} " if self.check else ""
        if not self.confirmed:
            return self.check
        if self.level is None:
            return f"{check}No escalation level applies: reported only."
        meaning = {
            Escalation.NOTIFY: "report only",
            Escalation.STOP_IDLE: "mark, then stop, idle resources in scope",
            Escalation.STOP_ALL: "mark, then stop, every unprotected resource in scope, busiest last",
        }[self.level.escalation]
        return f"{check}Escalation level `{self.level.label}`: {meaning}."


def budget_resource(alert: BudgetAlert, account: str, region: str) -> Resource:
    return Resource(
        kind=ResourceKind.BUDGET,
        id=alert.key,
        name=alert.name,
        account=alert.account or account,
        region=region,
        arn=f"arn:aws:budgets::{alert.account or account}:budget/{alert.name}",
    )


def breach_summary(breach: Breach, protect_tag_key: str, acted: Sequence[str] = ()) -> Finding:
    """The alert itself: what is burning money now, costliest first, and what its level did to which resource
    (``acted``, one line each): one message for the whole breach. Never acts itself."""
    in_scope = ranked(breach.running)
    body = (
        f"{breach.headline()} {breach.level_text()} Scope: {breach.scope.describe()}.\n"
        f"Running GPU and accelerator resources in scope, costliest first "
        f"({len(in_scope)}, {_money(total_hourly(in_scope), '/h')} together):\n"
        + listing(in_scope, protect_tag_key)
    )
    if breach.unreachable:
        body += "\nNot read (member role missing or refused): " + "; ".join(breach.unreachable)
    if acted:
        body += "\nWhat this level did:\n" + "\n".join(f"- {line}" for line in acted)
    return Finding(
        reason=Reason.BUDGET_BREACH,
        resource=budget_resource(breach.alert, breach.account, breach.region),
        # Every threshold and type of one budget is one conversation: 80%, 100%, forecast...
        thread=f"{breach.alert.account or breach.account}/global/{ResourceKind.BUDGET}/{breach.alert.name}",
        summary=body,
        report_note=_what_follows(breach),
        observed_at=breach.observed_at,
        event_id=breach.event_id,
        hourly_usd=total_hourly(in_scope),
        cost_usd=breach.alert.amount_usd if breach.alert.alert_type is AlertType.ACTUAL else None,
        evidence={
            "alert_type": breach.alert.alert_type.value,
            "budgeted_usd": breach.alert.budgeted_usd,
            "amount_usd": breach.alert.amount_usd,
            "percent_of_budget": breach.alert.percent,
            "escalation": breach.level.label if breach.level else "none",
            "budget_check": breach.check,
            "scope": breach.scope.describe(),
            "ranked": [
                {
                    "kind": r.resource.kind.value,
                    "id": r.resource.id,
                    "hourly_usd": r.hourly_usd,
                    "verdict": r.verdict,
                }
                for r in in_scope
            ],
        },
    )


def _what_follows(breach: Breach) -> str:
    """The summary's own action line: what the level does, never a bare "no action" beside an escalation."""
    if not breach.confirmed:
        return "not confirmed by AWS Budgets, so nothing is marked or stopped"
    if breach.escalation is Escalation.STOP_IDLE:
        return (
            "the idle resources in scope are marked, then stopped after the grace period (what became of each: "
            "under 'What this level did')"
        )
    if breach.escalation is Escalation.STOP_ALL:
        return (
            "every unprotected resource in scope is marked, then stopped after the grace period, busiest last "
            "(what became of each: under 'What this level did')"
        )
    return "reported only: this level stops nothing"


def breach_stops(
    breach: Breach,
    *,
    protect_tag_key: str,
    grace: timedelta,
    max_stops: int,
    folded: bool = False,
    dry: Callable[[Resource], bool] | None = None,
) -> list[Finding]:
    """The resources this level may act on, busiest last, as remediable findings for the common policy.

    Every candidate is marked at once (owners hear early); of those whose grace period is over, only the
    first ``max_stops`` in busiest-last order are offered, so the per-run cap holds the busiest back
    rather than the cheapest. Protected and unstoppable resources are in the summary, not here. ``dry``: the
    resources decided as dry runs where others act (ReasonModes, RemediateScope), counted apart, as the policy's
    cap counts them.
    """
    if breach.escalation is Escalation.NOTIFY:
        return []
    wanted = [
        r
        for r in busiest_last(breach.running)
        if r.stoppable
        and not is_protected(r.resource.tags, protect_tag_key)
        and (breach.escalation is Escalation.STOP_ALL or r.verdict == "idle")
    ]
    findings: list[Finding] = []
    due = {False: 0, True: 0}  # live, dry
    for r in wanted:
        mark = marked_at(r.resource.tags)
        if mark is not None and mark + grace <= breach.observed_at:
            group = dry is not None and dry(r.resource)
            due[group] += 1
            if due[group] > max_stops:
                continue  # the busier ones wait for the next run
        findings.append(
            Finding(
                reason=Reason.BUDGET_BREACH,
                resource=r.resource,
                summary=f"{breach.headline()} {breach.level_text()} {r.resource.display_name} "
                f"({r.resource.instance_type}, {_money(r.hourly_usd, '/h')}) is {r.verdict}.",
                observed_at=breach.observed_at,
                event_id=breach.event_id,
                hourly_usd=r.hourly_usd,
                remediable=True,
                folded=folded,
                evidence={
                    "budget": breach.alert.name,
                    "escalation": breach.level.label if breach.level else "none",
                    "verdict": r.verdict,
                    "scope": breach.scope.describe(),
                },
            )
        )
    return findings


def unreadable_budget_finding(
    message: str,
    subject: str | None,
    problem: str,
    *,
    account: str,
    region: str,
    now: datetime,
    event_id: str,
) -> Finding:
    """A message on the budget topic costguard cannot read: forwarded as received, with a note."""
    name = subject or "AWS Budgets message"
    return Finding(
        reason=Reason.BUDGET_BREACH,
        resource=Resource(
            kind=ResourceKind.BUDGET, id=f"unreadable/{event_id}", name=name, account=account, region=region
        ),
        summary=f"costguard could not read this message ({problem}): its budget, and so its scope, are unknown, "
        f"so it lists nothing and stops nothing; here it is as received:\n\n{message}",
        report_note="unreadable, so its budget and scope are unknown: nothing is listed or stopped",
        observed_at=now,
        event_id=event_id,
        evidence={"note": "unexpected wording: forwarded as received", "problem": problem},
    )


# -- cost anomalies ------------------------------------------------------------------------------

_EC2_KINDS = frozenset({ResourceKind.EC2_INSTANCE})
_SAGEMAKER_KINDS = frozenset({ResourceKind.TRAINING_JOB, ResourceKind.NOTEBOOK, ResourceKind.ENDPOINT})


def kinds_of_service(service: str | None) -> frozenset[ResourceKind]:
    text = (service or "").lower()
    if "elastic compute cloud" in text or text.startswith("ec2") or "amazon ec2" in text:
        return _EC2_KINDS
    if "sagemaker" in text:
        return _SAGEMAKER_KINDS
    return frozenset()


# A region code (us-east-1, ap-southeast-4): Cost Explorer also names ``global`` and ``NoRegion``.
_REGION_CODE = re.compile(r"[a-z]{2}(-[a-z]+)+-[0-9]{1,2}")


def cause_region(region: str | None, default_region: str) -> str | None:
    """A root cause's region, trimmed: ``default_region`` when it names none, None when what it names is not
    a region code (``global``, ``NoRegion``): there is no region to list resources in."""
    text = (region or "").strip()
    if not text:
        return default_region
    return text if _REGION_CODE.fullmatch(text) else None


def anomaly_scope(anomaly: Anomaly, own_account: str, default_region: str) -> dict[str, set[ResourceKind]]:
    """Region -> resource kinds to list: the root causes' services in this account (or the monitored
    dimension when there are no root causes). Other accounts' resources are not visible from here, nor those
    of a root cause whose region is not a region code (``unread_regions``)."""
    wanted: dict[str, set[ResourceKind]] = {}
    causes = anomaly.root_causes or []
    for cause in causes:
        if cause.linked_account and own_account and cause.linked_account != own_account:
            continue
        kinds = kinds_of_service(cause.service)
        where = cause_region(cause.region, default_region)
        if kinds and where is not None:
            wanted.setdefault(where, set()).update(kinds)
    if not causes:
        kinds = kinds_of_service(anomaly.dimension_value)
        if kinds:
            wanted.setdefault(default_region, set()).update(kinds)
    return wanted


def unread_regions(anomaly: Anomaly, own_account: str) -> list[str]:
    """The regions of this account's root causes, of a GPU service, that are not region codes (trimmed, each
    once): ``anomaly_scope`` lists nothing there, and the finding says so."""
    found: list[str] = []
    for cause in anomaly.root_causes or []:
        if cause.linked_account and own_account and cause.linked_account != own_account:
            continue
        text = (cause.region or "").strip()
        if kinds_of_service(cause.service) and cause_region(text, "") is None and text not in found:
            found.append(text)
    return found


def anomaly_finding(
    anomaly: Anomaly,
    running: Sequence[Running],
    *,
    account: str,
    region: str,
    now: datetime,
    event_id: str | None,
    protect_tag_key: str,
    unread: Sequence[str] = (),
) -> Finding:
    """``cost_anomaly``: impact, root causes and the GPU resources running in what they name. Never acts.
    ``unread``: the root causes' regions that are not region codes, where nothing could be listed."""
    impact = anomaly.impact
    percent = f" (+{impact.total_impact_percentage:g}%)" if impact.total_impact_percentage is not None else ""
    causes = "; ".join(
        ", ".join(
            part
            for part in (
                c.service,
                (c.region or "").strip(),
                c.usage_type,
                f"account {c.linked_account}"
                + (f" ({c.linked_account_name})" if c.linked_account_name else "")
                if c.linked_account
                else None,
            )
            if part
        )
        for c in anomaly.root_causes
    )
    listed = ranked(named_by_causes(anomaly, running, default_region=region))
    what = anomaly.dimension_value or anomaly.monitor_name or "spend"
    summary = (
        f"Cost anomaly on {what} since {anomaly.start_date or 'an unknown date'}: "
        f"{_money(impact.total_impact)} above the expected {_money(impact.total_expected_spend)} "
        f"(actual {_money(impact.total_actual_spend)}){percent}.\n"
        f"Root causes: {causes or 'none given'}.\n"
        + (f"Regions not read (not a region code): {', '.join(unread)}.\n" if unread else "")
        + f"Running GPU and accelerator resources its root causes name (service, region, usage type, account), "
        f"costliest first "
        f"({len(listed)}, {_money(total_hourly(listed), '/h')} together):\n"
        + listing(listed, protect_tag_key)
    )
    return Finding(
        reason=Reason.COST_ANOMALY,
        resource=Resource(
            kind=ResourceKind.COST_ANOMALY,
            id=anomaly.anomaly_id,
            name=f"{anomaly.monitor_name}: {what}" if anomaly.monitor_name else what,
            arn=anomaly.monitor_arn,
            account=anomaly.account_id or account,
            region=region,
        ),
        summary=summary,
        observed_at=now,
        event_id=event_id,
        hourly_usd=total_hourly(listed),
        cost_usd=impact.total_impact,
        evidence={
            "max_score": anomaly.score.max_score,
            "total_impact_usd": impact.total_impact,
            "details": anomaly.details_link,
            **({"regions_not_read": list(unread)} if unread else {}),
            "ranked": [
                {
                    "kind": r.resource.kind.value,
                    "id": r.resource.id,
                    "hourly_usd": r.hourly_usd,
                    "verdict": r.verdict,
                }
                for r in listed
            ],
        },
    )


# What a SageMaker usage type's operation runs on (USE1-Train:ml.p4d.24xlarge, USE1-Notebk:ml.g5.xlarge).
_SAGEMAKER_USAGE = {
    "train": ResourceKind.TRAINING_JOB,
    "notebk": ResourceKind.NOTEBOOK,
    "host": ResourceKind.ENDPOINT,
}
_INSTANCE_TYPE = re.compile(r"(?:ml\.)?[a-z][a-z0-9-]*\.[a-z0-9-]+")


def _named_by(cause: RootCause, resource: Resource, default_region: str) -> bool:
    """Whether a root cause names the resource: one of its service's kinds, in its region and linked account,
    and, when its usage type names an instance type (BoxUsage:p4d.24xlarge), of that type and of the kind that
    usage runs on (Train: a training job, Notebk: a notebook instance, Host: an endpoint)."""
    if cause.linked_account and cause.linked_account != resource.account:
        return False
    if cause_region(cause.region, default_region) != resource.region:
        return False
    if resource.kind not in kinds_of_service(cause.service):
        return False
    usage, _, named = (cause.usage_type or "").strip().rpartition(":")
    if _INSTANCE_TYPE.fullmatch(named) and named != resource.instance_type:
        return False
    operations = {_SAGEMAKER_USAGE[part] for part in usage.lower().split("-") if part in _SAGEMAKER_USAGE}
    return not operations or resource.kind in operations


def named_by_causes(anomaly: Anomaly, running: Iterable[Running], *, default_region: str) -> list[Running]:
    """What an anomaly lists: the running resources its root causes name (all of them when it gives none, as
    its monitored dimension is then all there is), each once."""
    causes = anomaly.root_causes or []
    found: dict[str, Running] = {}
    for r in running:
        if r.resource.key in found:
            continue
        if not causes or any(_named_by(c, r.resource, default_region) for c in causes):
            found[r.resource.key] = r
    return list(found.values())


def keep_budget_marks(findings: list[Finding], stop_all_scopes: Sequence[Scope]) -> list[Finding]:
    """Drop the sweeps' "working again" cancels on resources a ``stop_all`` breach in force has marked (the
    breaches' scopes, ``aws.budgets.stop_all_scopes_for``): that mark stops busy resources on purpose."""
    held = {
        id(f)
        for f in findings
        if f.cancels_mark and any(scope.covers(f.resource) for scope in stop_all_scopes)
    }
    return [f for f in findings if id(f) not in held]
