"""Block Kit messages: what was found, on what, what it costs, what was done, how to protect it."""

from __future__ import annotations

from typing import Any

from costguard.model import Action, Reason, ResourceKind
from costguard.notify.links import console_url
from costguard.notify.notice import Notice

TITLES: dict[Reason, str] = {
    Reason.TRAINING_JOB_FAILED: "Training job failed",
    Reason.GPU_IDLE: "Idle GPU instance",
    Reason.GPU_STARVED: "Data-starved GPUs",
    Reason.GPU_METRICS_MISSING: "No GPU metrics",
    Reason.JOB_STALLED: "Training job stalled",
    Reason.NOTEBOOK_IDLE: "Idle GPU notebook",
    Reason.ENDPOINT_IDLE: "GPU endpoint with no traffic",
    Reason.BATCH_RETRY_LOOP: "Batch job failing in a retry loop",
    Reason.SPOT_INTERRUPTION: "Spot instance being interrupted",
    Reason.JOB_FAILURE_LOOP: "Training job failing in a loop",
    Reason.JOB_COST_WARNING: "Training job nearing its cost ceiling",
    Reason.JOB_COST_CEILING: "Training job over its cost ceiling",
    Reason.JOB_NO_MAX_RUNTIME: "Training job without a sane max runtime",
    Reason.SPOT_WITHOUT_CHECKPOINT: "Spot training job without checkpoints",
    Reason.SPOT_RECOMMENDED: "Long on-demand training job: spot recommended",
    Reason.TRAINING_DIGEST: "Daily training digest",
    Reason.CAPACITY_RESERVATION_IDLE: "Capacity reservation paid for but unused",
    Reason.CAPACITY_BLOCK_EXPIRING: "Capacity Block ending: checkpoint now",
    Reason.CAPACITY_BLOCK_UNUSED: "Capacity Block paid for with nothing running",
    Reason.CAPACITY_RESERVATION_STATE: "Capacity reservation state change",
    Reason.BUDGET_BREACH: "Budget breached: what is burning money now",
    Reason.COST_ANOMALY: "Cost anomaly",
    Reason.COSTGUARD_ALARM: "costguard itself needs attention",
}

_MAX_TEXT = 2900  # Slack rejects section text over 3000 characters
_MAX_FIELD = 1900  # and a section field over 2000


def escape(text: str) -> str:
    """Text from AWS or users must not ping channels or forge links in mrkdwn."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _money(value: float | None, suffix: str = "") -> str:
    return "unknown" if value is None else f"${value:,.2f}{suffix}"


def action_line(notice: Notice) -> str:
    decision, outcome = notice.decision, notice.outcome
    if outcome.error:
        return f":x: {outcome.detail}: {outcome.error}"
    if outcome.capped:
        return f":no_entry: Not stopped: {outcome.detail} (MaxStopsPerHour). It stays marked and is retried next run."
    if decision.action is Action.UNMARK:
        return f":arrow_forward: {'Would cancel (dry run)' if decision.dry_run else 'Cancelled'} the pending stop: {decision.note}."
    # A capacity reservation is cancelled, not stopped: the same action, said as AWS says it.
    stop, stopped = (
        ("cancel", "Cancelled")
        if decision.resource.kind is ResourceKind.CAPACITY_RESERVATION
        else ("stop", "Stopped")
    )
    if decision.action is Action.STOP:
        return f":stop_sign: {f'Would {stop} (dry run)' if decision.dry_run else stopped}. {decision.note}"
    if decision.action is Action.MARK:
        when = decision.stop_after.strftime("%Y-%m-%d %H:%M UTC") if decision.stop_after else "later"
        prefix = f"Would mark for {stop} (dry run)" if decision.dry_run else f"Marked for {stop}"
        return f":hourglass_flowing_sand: {prefix}; {stop} due at {when} unless it gets busy or is protected."
    return f":information_source: No action: {decision.note}."


def _clip(text: str, limit: int = _MAX_TEXT) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def build_message(notice: Notice) -> dict[str, Any]:
    """The webhook payload: ``text`` for notifications and ``blocks`` for the message itself."""
    decision = notice.decision
    finding = decision.finding
    resource = finding.resource
    title = TITLES.get(decision.reason, decision.reason.value)
    tags = ", ".join(f"`{escape(k)}={escape(v)}`" for k, v in sorted(resource.tags.items())[:12]) or "none"
    fields = [
        f"*Resource*\n<{console_url(resource)}|{escape(resource.display_name)}>",
        f"*Type*\n{escape(resource.instance_type or 'unknown')} x {resource.instance_count}",
        f"*Account / region*\n{resource.account} / {resource.region}",
        f"*Cost per hour*\n{_money(finding.hourly_usd, '/h')}",
    ]
    if finding.cost_usd is not None:
        fields.append(f"*Spent*\n{_money(finding.cost_usd)}")
    fields.append(f"*Reason code*\n`{decision.reason.value}`")
    evidence = "\n".join(
        f"• {k}: {escape(str(v))}" for k, v in finding.evidence.items() if v not in (None, "", [], {})
    )
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": f"costguard: {title}"[:150]}},
        {"type": "section", "text": {"type": "mrkdwn", "text": _clip(escape(finding.summary))}},
        {"type": "section", "fields": [{"type": "mrkdwn", "text": _clip(f, _MAX_FIELD)} for f in fields]},
        {"type": "section", "text": {"type": "mrkdwn", "text": _clip(escape(action_line(notice)))}},
    ]
    if evidence:
        blocks.append(
            {"type": "section", "text": {"type": "mrkdwn", "text": _clip(f"*Evidence*\n{evidence}")}}
        )
    blocks.append(
        {
            "type": "context",
            "elements": [
                {"type": "mrkdwn", "text": _clip(f"Tags: {tags}")},
                {
                    "type": "mrkdwn",
                    "text": f"To protect it from costguard, tag it `{notice.protect_tag_key}=true`.",
                },
            ],
        }
    )
    text = (
        f"costguard {decision.reason.value}: {resource.display_name} ({resource.account}/{resource.region})"
    )
    return {"text": text, "blocks": blocks}
