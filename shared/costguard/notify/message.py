"""Block Kit messages: what was found, on what, what it costs, what was done, how to protect it."""

from __future__ import annotations

import re
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

# Slack's limits (docs.slack.dev, Block Kit reference): top-level ``text`` 40,000 characters (Slack truncates
# beyond), a section's text 3,000, a section field 2,000, a header's plain_text 150, any other text object 3,000.
# Lengths are counted here in UTF-16 code units (an emoji outside the BMP counts 2), never fewer than Slack counts.
MAX_TEXT = 40_000
MAX_SECTION = 3_000
MAX_FIELD = 2_000
MAX_HEADER = 150
MAX_CONTEXT = 3_000
# Slack also refuses a message whose blocks add up to much more than about 12,000 characters
# (msg_blocks_too_long), so the pieces taken from AWS or users get budgets well under the per-block limits.
_NAME = 300  # a name or id inside a field (an EC2 Name tag is at most 256)
_SHORT = 100  # an instance type, an account id, a region
_TAG_KEY, _TAG_VALUE = 128, 256  # AWS's own limits for a tag
_EVIDENCE_VALUE = MAX_SECTION  # one value may fill the evidence section (a ranked list, say)
_ACTION = 2_000
_TAGS = 1_500
_NOTIFICATION_NAME = 1_000  # the resource name in the notification text

# Unicode bidirectional controls: they make text read differently from what it is (Trojan Source).
_BIDI = re.compile("[\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c]")
_ACCOUNT = re.compile(r"[0-9]{12}")  # \d would take any script's digits
# A console link is put inside <url|name> only if nothing in it can end the link or start another.
_SAFE_URL = re.compile(r"https://[A-Za-z0-9.-]+\.amazon\.com/[A-Za-z0-9/?#=:%._~+-]*")
_MAX_URL = 1_000


def clean(text: str) -> str:
    """No bidirectional controls, and no lone surrogate (which no JSON encoder should send)."""
    text = _BIDI.sub("", text)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "replace").decode("utf-8")
    return text


def escape(text: str) -> str:
    """Text from AWS or users must not ping channels or forge links in mrkdwn: Slack's three control
    characters become entities, and bidirectional controls go."""
    return clean(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def clip(text: str, limit: int) -> str:
    """At most ``limit`` UTF-16 code units, ending in an ellipsis when cut; never half a surrogate pair or half an
    entity (``&amp;``) of escaped text."""
    if len(text) <= limit // 2 or utf16_len(text) <= limit:
        return text
    # Decoding a cut UTF-16 buffer with "ignore" drops a pair's lone first half at the end.
    head = text.encode("utf-16-le", "surrogatepass")[: 2 * (limit - 1)].decode("utf-16-le", "ignore")
    amp = head.rfind("&", max(0, len(head) - 5))
    if amp != -1 and ";" not in head[amp:]:
        head = head[:amp]
    return head + "…"


def _text(value: object, limit: int) -> str:
    """Any value from AWS or users, as safe mrkdwn of at most ``limit`` units."""
    return clip(escape(str(value)), limit)


def _code(value: object, limit: int) -> str:
    """The same, for inside a `code span` (a backtick would end it)."""
    return _text(str(value).replace("`", "'"), limit)


def account_text(account: str) -> str:
    """An AWS account id is 12 digits; anything else is shown as what it is, escaped."""
    if _ACCOUNT.fullmatch(account):
        return account
    return f"invalid account id `{_code(account, 40)}`"


def _resource_link(url: str, name: str) -> str:
    if len(url) <= _MAX_URL and _SAFE_URL.fullmatch(url):
        return f"<{url}|{name}>"
    return name


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
    if decision.finding.report_note:  # what follows from it, said as such: not "no action"
        return f":information_source: {decision.note}."
    return f":information_source: No action: {decision.note}."


def build_message(notice: Notice) -> dict[str, Any]:
    """The webhook payload: ``text`` for notifications and ``blocks`` for the message itself.

    Every string that came from AWS or a user (a Name tag, an SNS subject, a monitor name, an error) is
    escaped, stripped of bidirectional controls and clipped to Slack's limits, in every field.
    """
    decision = notice.decision
    finding = decision.finding
    resource = finding.resource
    title = TITLES.get(decision.reason, decision.reason.value)
    account, region = account_text(resource.account), _text(resource.region, _SHORT)
    tags = (
        ", ".join(
            f"`{_code(k, _TAG_KEY)}={_code(v, _TAG_VALUE)}`" for k, v in sorted(resource.tags.items())[:12]
        )
        or "none"
    )
    fields = [
        f"*Resource*\n{_resource_link(console_url(resource), _text(resource.display_name, _NAME))}",
        f"*Type*\n{_text(resource.instance_type or 'unknown', _SHORT)} x {resource.instance_count}",
        f"*Account / region*\n{account} / {region}",
        f"*Cost per hour*\n{_money(finding.hourly_usd, '/h')}",
    ]
    if finding.cost_usd is not None:
        fields.append(f"*Spent*\n{_money(finding.cost_usd)}")
    fields.append(f"*Reason code*\n`{_code(decision.reason.value, _SHORT)}`")
    evidence = "\n".join(
        f"• {_text(k, _SHORT)}: {_text(v, _EVIDENCE_VALUE)}"
        for k, v in finding.evidence.items()
        if v not in (None, "", [], {})
    )
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": _text(f"costguard: {title}", MAX_HEADER)}},
        {"type": "section", "text": {"type": "mrkdwn", "text": _text(finding.summary, MAX_SECTION)}},
        {"type": "section", "fields": [{"type": "mrkdwn", "text": clip(f, MAX_FIELD)} for f in fields]},
        {"type": "section", "text": {"type": "mrkdwn", "text": _text(action_line(notice), _ACTION)}},
    ]
    if evidence:
        blocks.append(
            {
                "type": "section",
                "text": {"type": "mrkdwn", "text": clip(f"*Evidence*\n{evidence}", MAX_SECTION)},
            }
        )
    blocks.append(
        {
            "type": "context",
            "elements": [
                {"type": "mrkdwn", "text": clip(f"Tags: {tags}", _TAGS)},
                {
                    "type": "mrkdwn",
                    "text": f"To protect it from costguard, tag it `{_code(notice.protect_tag_key, _TAG_KEY)}=true`.",
                },
            ],
        }
    )
    name = _text(resource.display_name, _NOTIFICATION_NAME)
    text = clip(f"costguard {_text(decision.reason.value, _SHORT)}: {name} ({account}/{region})", MAX_TEXT)
    return {"text": text, "blocks": blocks}
