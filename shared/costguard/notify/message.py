"""Block Kit messages: what was found, on what, what it costs, what was done, how to protect it.

The blocks are slack_sdk's Block Kit models, so Slack's limits are checked by the library as well; every string
from AWS or users still goes through escape() and clip() first.
"""

from __future__ import annotations

import math
import re
from typing import Any

from slack_sdk.models.blocks import (
    ActionsBlock,
    Block,
    ButtonElement,
    ConfirmObject,
    ContextBlock,
    HeaderBlock,
    MarkdownTextObject,
    Option,
    PlainTextObject,
    SectionBlock,
    StaticSelectElement,
)

from costguard.model import MARK_TAG_KEY, Action, Decision, Finding, Reason, Resource, ResourceKind
from costguard.notify.links import console_url
from costguard.notify.notice import Notice
from costguard.notify.text import (
    ACTION_LIMIT,
    EVIDENCE_VALUE_LIMIT,
    MAX_CONTEXT,
    MAX_FIELD,
    MAX_HEADER,
    MAX_SECTION,
    MAX_TEXT,
    NAME_LIMIT,
    NOTIFICATION_NAME_LIMIT,
    SHORT_LIMIT,
    TAG_KEY_LIMIT,
    TAG_VALUE_LIMIT,
    TAGS_LIMIT,
    clean,
    clip,
    money,
    resource_account,
    resource_link,
    safe_code,
    safe_text,
)
from costguard.notify.titles import TITLES, kind_noun
from costguard.notify.values import KEEP_MENU, MUTE_MENU, action_value
from costguard.policy import NOTIFY_ONLY, is_protected, snoozed_until


def title_of(decision: Decision) -> str:
    """The finding's title: its reason's, except where the reason alone would say more than is so. A budget's
    FORECASTED alert is a forecast, not a breach; an alert costguard could not read says neither; a resource a
    budget's level acts on is not itself a budget."""
    if decision.reason is Reason.BUDGET_BREACH:
        if decision.resource.kind is not ResourceKind.BUDGET:
            return "Budget escalation"
        alert = decision.finding.evidence.get("alert_type")
        if alert == "FORECASTED":
            return "Budget forecast to be exceeded: what is burning money now"
        if alert is None:
            return "Budget alert costguard could not read"
    return TITLES.get(decision.reason, decision.reason.value)


# A person's click told back (interact/actions.py): what it did, by the words its note starts with.
_ASKED = (("protected", "protected"), ("kept running", "kept running"))


def asked(notice: Notice) -> str | None:
    """What a person asked for and got, when the notice tells a Keep, Protect or Mute click ("protected", "kept
    running", "muted"); None for anything costguard decided, and for a stop (its action says it)."""
    if not notice.actor or notice.decision.action is not Action.NOTIFY:
        return None
    note = (notice.decision.finding.report_note or "").strip().lower()
    for start, done in _ASKED:
        if note.startswith(start):
            return done
    return "muted" if " muted until " in f" {note}" else None


def headline(notice: Notice) -> str:
    """What the message is about, as its header says it (unescaped). A click told back says what was done, never
    re-asserting as now the verdict of the finding the button was on."""
    decision = notice.decision
    title = title_of(decision)
    done = asked(notice)
    if done == "muted":
        return f"Muted: {title}"
    if done is not None:
        noun = kind_noun(decision.resource.kind)
        return f"{noun[:1].upper()}{noun[1:]} {done}"
    return title


def action_line(notice: Notice) -> str:
    decision, outcome = notice.decision, notice.outcome
    if outcome.error:
        return f":x: {outcome.detail}: {outcome.error}"
    if outcome.capped:
        return f":no_entry: Not stopped: {outcome.detail} (MaxStopsPerHour). It stays marked and is retried next run."
    if decision.action is Action.UNMARK:
        return f":arrow_forward: {'Would cancel (dry run)' if decision.dry_run else 'Cancelled'} the pending stop: {decision.note}."
    # A capacity reservation is cancelled, a Provisioned Throughput deleted, not stopped: the same action,
    # said as AWS says it.
    stop, stopped = _STOP_WORDS.get(decision.resource.kind, ("stop", "Stopped"))
    if decision.action is Action.STOP:
        return f":stop_sign: {f'Would {stop} (dry run)' if decision.dry_run else stopped}. {decision.note}"
    if decision.action is Action.MARK:
        when = decision.stop_after.strftime("%Y-%m-%d %H:%M UTC") if decision.stop_after else "later"
        dry = f"{NOTIFY_ONLY}{decision.held}" if decision.held else "dry run"  # why, where others act
        prefix = f"Would mark for {stop} ({dry})" if decision.dry_run else f"Marked for {stop}"
        return f":hourglass_flowing_sand: {prefix}; {stop} due at {when} unless it gets busy or is protected."
    if decision.finding.report_note:  # what follows from it, said as such: not "no action"
        return f":information_source: {decision.note}."
    return f":information_source: No action: {decision.note}."


_STOP_WORDS = {
    ResourceKind.CAPACITY_RESERVATION: ("cancel", "Cancelled"),
    ResourceKind.PROVISIONED_THROUGHPUT: ("delete", "Deleted"),
}


# What a message shows depends on what the resource is. Instance type, count and tags belong to things that run
# on instances; budgets, anomalies, job families, digests, Batch queues and costguard's own alarms have none.
INSTANCE_KINDS = frozenset(
    {
        ResourceKind.EC2_INSTANCE,
        ResourceKind.TRAINING_JOB,
        ResourceKind.NOTEBOOK,
        ResourceKind.ENDPOINT,
        ResourceKind.CAPACITY_RESERVATION,
        ResourceKind.BATCH_JOB,
    }
)


# What costguard can stop (or cancel), and so what the protect tag keeps from it.
_PROTECTABLE_KINDS = frozenset(
    {
        ResourceKind.EC2_INSTANCE,
        ResourceKind.TRAINING_JOB,
        ResourceKind.NOTEBOOK,
        ResourceKind.CAPACITY_RESERVATION,
        ResourceKind.PROVISIONED_THROUGHPUT,
    }
)


_MAX_ITEMS = 20  # items of one evidence list shown; the rest are counted


_ISO_TIME = re.compile(r"(\d{4}-\d{2}-\d{2})T(\d{2}:\d{2})(?::\d{2}(?:\.\d+)?)?(?:\+00:00|Z)")


# Capacity Blocks are never cancelled, in any mode: the protect tag would keep nothing from costguard.
_NEVER_ACTED_ON = frozenset({Reason.CAPACITY_BLOCK_EXPIRING, Reason.CAPACITY_BLOCK_UNUSED})


# Keys whose words alone would read oddly: their label and unit.
_LABELS = {
    "ranked": ("Running now, costliest first", ""),
    "percent_of_budget": ("Share of budget", "percent"),
    # The price table's, for one instance: a job of several costs that times its count (its Cost per hour).
    "price_usd_per_hour": ("Price per instance-hour", "usd"),
    "price_usd_per_instance_hour": ("Price per instance-hour", "usd"),
}


# Kinds whose summary already lists what runs in their scope, costliest first (detect/budgets.py): the evidence's
# ranked list would say it twice.
_LISTED_IN_SUMMARY = frozenset({ResourceKind.BUDGET, ResourceKind.COST_ANOMALY})


_WORDS = {"gpu": "GPU", "gpus": "GPUs", "cpu": "CPU", "id": "ID", "mb": "MB", "az": "AZ", "url": "URL"}


def _duration(seconds: float) -> str:
    total = round(seconds)
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h {minutes:02d}m"
    return f"{minutes}m {secs:02d}s"


def _label(key: str) -> tuple[str, str]:
    """An evidence key as words, and the unit its number is in: ``price_usd_per_hour`` is "Price per hour", in
    dollars."""
    if key in _LABELS:
        return _LABELS[key]
    words = key.split("_")
    unit = ""
    if "usd" in words:
        unit = "usd"
        words.remove("usd")
    elif len(words) > 1 and words[-1] in ("percent", "seconds"):
        unit = words.pop()
    text = " ".join(_WORDS.get(w, w) for w in words if w)
    return (text[:1].upper() + text[1:]) if text else key, unit


def _number(value: float, unit: str) -> str:
    if not math.isfinite(value):
        return "unknown"
    if unit == "usd":
        return f"${value:,.2f}"
    if unit == "seconds":
        return _duration(value)
    shown = f"{value:,}" if isinstance(value, int) else f"{value:,.2f}".rstrip("0").rstrip(".")
    return f"{shown}%" if unit == "percent" else shown


def _plain(value: object, unit: str = "") -> str:
    """One value as words on one line (not yet escaped): bools as yes/no, None as unknown, times in UTC, lists
    joined with semicolons and mappings as "key: value"."""
    if value is None:
        return "unknown"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int | float):
        return _number(value, unit)
    if isinstance(value, str):
        return _ISO_TIME.sub(r"\1 \2 UTC", value) if _ISO_TIME.fullmatch(value) else value
    if isinstance(value, dict):
        return _mapping(value) or "none"
    if isinstance(value, list | tuple | set | frozenset):
        return "; ".join(_plain(item) for item in value) or "none"
    return str(value)


def _mapping(value: dict[Any, Any]) -> str:
    """A mapping on one line. One that names a resource (an ``id``) leads with it: a ranked resource reads
    "i-0abc (ec2 instance): $21.96/h, idle"."""
    rest = {k: v for k, v in value.items() if k not in ("id", "kind")}
    parts = []
    for key, item in rest.items():
        label, unit = _label(str(key))
        if str(key) == "hourly_usd" and isinstance(item, int | float) and not isinstance(item, bool):
            parts.append(f"{_number(item, 'usd')}/h")
        elif str(key) in ("verdict", "state", "status"):
            parts.append(_plain(item).replace("_", " "))
        else:
            parts.append(f"{label.lower()}: {_plain(item, unit)}")
    if "id" in value:
        kind = f" ({str(value['kind']).replace('_', ' ')})" if "kind" in value else ""
        return f"{_plain(value['id'])}{kind}: {', '.join(parts)}" if parts else f"{_plain(value['id'])}{kind}"
    return ", ".join(parts)


def _evidence_lines(evidence: dict[str, Any], skip: frozenset[str]) -> list[str]:
    """The evidence as mrkdwn lines: a bullet per key, a list's items and a mapping's entries indented under it."""
    lines: list[str] = []
    for key, value in evidence.items():
        if key in skip or value is None or value in ("", [], {}, ()):
            continue
        label, unit = _label(str(key))
        if isinstance(value, dict):
            items = [f"{_label(str(k))[0]}: {_plain(v, _label(str(k))[1])}" for k, v in value.items()]
        elif isinstance(value, list | tuple):
            items = [_plain(item, unit) for item in value]
        else:
            lines.append(
                f"• {safe_text(label, SHORT_LIMIT)}: {safe_text(_plain(value, unit), EVIDENCE_VALUE_LIMIT)}"
            )
            continue
        lines.append(f"• {safe_text(label, SHORT_LIMIT)}:")
        lines.extend(f"    ◦ {safe_text(item, EVIDENCE_VALUE_LIMIT)}" for item in items[:_MAX_ITEMS])
        if len(items) > _MAX_ITEMS:
            lines.append(f"    ◦ … and {len(items) - _MAX_ITEMS} more")
    return lines


def stopped(notice: Notice) -> bool:
    """Whether this notice tells a stop that happened (not a dry run's, a capped or a failed one): only then
    does a message say how to start the resource again."""
    decision = notice.decision
    return (
        decision.action is Action.STOP
        and not decision.dry_run
        and not notice.outcome.error
        and not notice.outcome.capped
    )


def restart_line(resource: Resource) -> str | None:
    """How to get a stopped (or cancelled) resource back, as safe mrkdwn; None for kinds costguard never stops."""
    rid, region = safe_code(resource.id, NAME_LIMIT), safe_code(resource.region, SHORT_LIMIT)
    match resource.kind:
        case ResourceKind.EC2_INSTANCE:
            return (
                f":arrow_forward: To start it again: `aws ec2 start-instances --instance-ids {rid} "
                f"--region {region}`, or Instance state &gt; Start instance in the EC2 console."
            )
        case ResourceKind.NOTEBOOK:
            return (
                f":arrow_forward: To start it again: `aws sagemaker start-notebook-instance --notebook-instance-name "
                f"{rid} --region {region}` (StartNotebookInstance), or Start in the SageMaker console. Its ML "
                "storage volume is kept."
            )
        case ResourceKind.TRAINING_JOB:
            return (
                ":repeat: A stopped training job cannot be started again: re-run it (a new job, from its last "
                "checkpoint if it writes any)."
            )
        case ResourceKind.CAPACITY_RESERVATION:
            return ":repeat: A cancelled capacity reservation cannot be restored: create a new one if it is needed."
        case ResourceKind.PROVISIONED_THROUGHPUT:
            return (
                ":repeat: A deleted Provisioned Throughput cannot be restored: purchase a new one "
                "(CreateProvisionedModelThroughput) for the same model if it is needed; the model itself is kept."
            )
    return None


def figure_text(finding: Finding) -> str:
    """The dollar figure for the notification text: per hour and spent where known, else the reason's own. A
    budget's or an anomaly's per-hour figure is what runs in its scope, not its own cost: its own figures are
    the amount against the budget, the anomaly's impact, what a family spent."""
    parts = []
    if finding.resource.kind.has_own_rate:
        if finding.hourly_usd is not None:
            parts.append(f"${finding.hourly_usd:,.2f}/h")
        if finding.cost_usd is not None:
            parts.append(f"${finding.cost_usd:,.2f} spent")
    if parts:
        return ", ".join(parts)

    def usd(key: str) -> float | None:
        value = finding.evidence.get(key)
        return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None

    amount, budgeted = usd("amount_usd"), usd("budgeted_usd")
    if amount is not None:
        return f"${amount:,.2f} of ${budgeted:,.2f}" if budgeted is not None else f"${amount:,.2f}"
    if (impact := usd("total_impact_usd")) is not None:
        return f"${impact:,.2f} impact"
    if finding.cost_usd is not None:
        return f"${finding.cost_usd:,.2f} {_spent_word(finding)}"
    if (total := usd("total_cost_usd")) is not None:
        return f"${total:,.2f} spent"
    return ""


def _spent_word(finding: Finding) -> str:
    """What a finding's cost_usd is: an anomaly's is its impact above the expected spend, a savings report's what
    costguard's stops kept off the bill."""
    if finding.resource.kind is ResourceKind.SAVINGS_LEDGER:
        return "saved"
    return "impact" if finding.resource.kind is ResourceKind.COST_ANOMALY else "spent"


def _cost_label(resource: Resource) -> str:
    """The cost field's label: what its figure is for, when a resource runs on several instances."""
    if resource.instance_count > 1:
        return f"Cost per hour ({resource.instance_count} instances)"
    return "Cost per hour"


def _type_field(resource: Resource) -> str:
    kind = safe_text(resource.instance_type or "unknown", SHORT_LIMIT)
    if resource.kind is ResourceKind.EC2_INSTANCE and resource.instance_count == 1:
        return f"*Type*\n{kind}"
    return f"*Type*\n{kind} x {resource.instance_count}"


def _context(notice: Notice) -> list[str]:
    resource = notice.decision.resource
    key = safe_code(notice.protect_tag_key, TAG_KEY_LIMIT)
    elements = []
    if resource.kind in INSTANCE_KINDS:
        tags = (
            ", ".join(
                f"`{safe_code(k, TAG_KEY_LIMIT)}={safe_code(v, TAG_VALUE_LIMIT)}`"
                for k, v in sorted(resource.tags.items())[:12]
            )
            or "none"
        )
        elements.append(clip(f"Tags: {tags}", TAGS_LIMIT))
    if resource.kind in _PROTECTABLE_KINDS and notice.decision.reason not in _NEVER_ACTED_ON:
        if is_protected(resource.tags, notice.protect_tag_key):
            elements.append(f":shield: Protected by its tag `{key}`: costguard never stops it.")
        else:
            elements.append(f"To protect it from costguard, tag it `{key}=true`.")
    return elements


def build_message(notice: Notice, *, owner: str | None = None, interactive: bool = False) -> dict[str, Any]:
    """The webhook payload: ``text`` for notifications (with the dollar figure) and ``blocks`` for the message.

    Every string that came from AWS or a user (a Name tag, an SNS subject, a monitor name, an error) is
    escaped, stripped of bidirectional controls and clipped to Slack's limits, in every field. Fields that do not
    apply to the resource's kind (instance type, tags, the protect hint) are left out.

    ``owner`` is the owner's mention (``<@U123>``, from the owner tag; see owner_text) and ``interactive`` adds
    the buttons (Slack app only: a webhook message cannot carry them).
    """
    decision = notice.decision
    finding = decision.finding
    resource = finding.resource
    title = headline(notice)
    account, region = resource_account(resource), safe_text(resource.region, SHORT_LIMIT)
    on_instances = resource.kind in INSTANCE_KINDS
    fields = [
        f"*Resource*\n{resource_link(console_url(resource), safe_text(resource.display_name, NAME_LIMIT))}"
    ]
    if on_instances:
        fields.append(_type_field(resource))
    fields.append(f"*Account / region*\n{account} / {region}")
    if shown_owner := owner_text(resource, owner):
        fields.append(f"*Owner*\n{shown_owner}")
    # A budget's or an anomaly's $/h is what runs in its scope (its summary says so), never its own cost.
    if resource.kind.has_own_rate:
        fields.append(f"*{_cost_label(resource)}*\n{money(finding.hourly_usd, '/h')}")
    if finding.cost_usd is not None:
        fields.append(f"*{_spent_word(finding).capitalize()}*\n{money(finding.cost_usd)}")
    fields.append(f"*Reason code*\n`{safe_code(decision.reason.value, SHORT_LIMIT)}`")
    # What the fields (or the summary) already say is not repeated in the evidence.
    shown = {"instance_type": resource.instance_type, "instance_count": resource.instance_count}
    skip = frozenset(k for k, v in shown.items() if on_instances and finding.evidence.get(k) == v)
    if resource.kind in _LISTED_IN_SUMMARY:
        skip |= {"ranked"}
    if finding.cost_usd is not None and finding.evidence.get("total_impact_usd") == finding.cost_usd:
        skip |= {"total_impact_usd"}  # the Impact field
    evidence = _evidence_lines(finding.evidence, skip)
    action = safe_text(action_line(notice), ACTION_LIMIT)
    if notice.actor and USER_ID.fullmatch(notice.actor):  # a person asked for it (a button in Slack)
        action = f"{action}\nAsked by <@{notice.actor}> at {decision.decided_at:%Y-%m-%d %H:%M UTC}."
    if asked(notice) is not None:  # the button's finding, said as what it was, not as the verdict now
        action = f"{action}\nAsked from its message about: {safe_text(title_of(decision), SHORT_LIMIT)}."
    if stopped(notice) and (restart := restart_line(resource)):
        action = f"{action}\n{restart}"
    blocks: list[Block] = [
        HeaderBlock(text=PlainTextObject(text=safe_text(f"costguard: {title}", MAX_HEADER))),
        # Slack refuses an empty text: a finding without a summary says so.
        SectionBlock(text=MarkdownTextObject(text=safe_text(finding.summary, MAX_SECTION) or "(no summary)")),
        SectionBlock(fields=[MarkdownTextObject(text=clip(f, MAX_FIELD)) for f in fields]),
        SectionBlock(text=MarkdownTextObject(text=clip(action, MAX_SECTION))),
    ]
    if evidence:
        text = clip("*Evidence*\n" + "\n".join(evidence), MAX_SECTION)
        blocks.append(SectionBlock(text=MarkdownTextObject(text=text)))
    context = _context(notice)
    if interactive and _may_stop(notice) and decision.dry_run:
        context.append(_NOTIFY_MODE if decision.held is None else _NOTIFY_ONLY.format(why=decision.held))
    if context:
        blocks.append(ContextBlock(elements=[MarkdownTextObject(text=clip(e, MAX_CONTEXT)) for e in context]))
    if interactive and (buttons := actions_for(notice)):
        blocks.append(buttons)
    name = safe_text(resource.display_name, NOTIFICATION_NAME_LIMIT)
    figure = figure_text(finding)
    text = f"costguard: {safe_text(title_of(decision), SHORT_LIMIT)}: {name} ({account}/{region})"
    text = clip(f"{text}: {figure}" if figure else text, MAX_TEXT)
    return {"text": text, "blocks": [block.to_dict() for block in blocks]}


# -- owners, buttons, replies and groups ------------------------------------------------------------------------

OWNER_TAG = "owner"


USER_ID = re.compile(r"[UW][A-Z0-9]{8,}")


# The interactions endpoint (interact/) reads these: "<hours>|<reason>|<resource key>" for a choice of time,
# "<reason>|<resource key>" for a button. Slack takes at most 150 characters in an option's value.
KEEP, STOP_NOW, PROTECT, MUTE = "costguard:keep", "costguard:stop", "costguard:protect", "costguard:mute"


KEEP_HOURS = KEEP_MENU  # the menus the worker accepts (notify/values.py): one list for both


MUTE_HOURS = MUTE_MENU


# What a person can keep running, stop now or protect from a message: what costguard itself may stop.
_CLICKABLE_KINDS = frozenset({ResourceKind.EC2_INSTANCE, ResourceKind.NOTEBOOK, ResourceKind.TRAINING_JOB})


ROWS_BRIEF = 40  # the next rows, a line each; the rest are counted and linked


_NOTIFY_MODE = (
    "Notify mode: costguard stops nothing, so there is no Stop now; its action line says what remediate mode "
    "would do."
)


_NOTIFY_ONLY = (
    "Notify only: {why}, so costguard does not act on it and there is no Stop now; its action line says what "
    "remediate would do."
)


def owner_text(resource: Resource, mention: str | None) -> str | None:
    """The owner as a mention when it resolved to a Slack user, else the owner tag as it is (escaped); None when
    the resource has no owner tag. A tag that already is a user id is a mention without a lookup."""
    if mention and USER_ID.fullmatch(mention):
        return f"<@{mention}>"
    tag = resource.tags.get(OWNER_TAG, "").strip()
    if not tag:
        return None
    if USER_ID.fullmatch(tag):
        return f"<@{tag}>"
    return safe_text(tag, SHORT_LIMIT)


def _value(reason: str, key: str, hours: int | None = None) -> str:
    return action_value(reason, key, hours)  # the endpoint reads them back with its parser


def _may_stop(notice: Notice) -> bool:
    """Whether costguard acts on this finding and the resource is still there to act on: a finding it remediates
    (not a failed or finished job, a spot interruption, starved GPUs, a stale checkpoint...), of a kind a button
    acts on, still running and not protected. Only then do Keep running and Protect change anything."""
    decision = notice.decision
    resource = decision.resource
    stopped = decision.action is Action.STOP and notice.outcome.done and not decision.dry_run
    return (
        resource.kind in _CLICKABLE_KINDS
        and decision.finding.remediable
        and not stopped
        and not is_protected(resource.tags, notice.protect_tag_key)
    )


def _stop_now_works(notice: Notice) -> bool:
    """Whether Stop now would stop it (policy.decide_requested_stop): costguard acts (remediate mode), the
    resource carries costguard's mark (or this notice marked it, or is its stop), and no snooze or stop blocker
    (an Auto Scaling group, stop protection) holds it."""
    decision = notice.decision
    resource = decision.resource
    if decision.dry_run or snoozed_until(resource.tags, decision.decided_at) is not None:
        return False
    if resource.stop_blocker is not None:
        return False
    if decision.action is Action.UNMARK:
        return False
    marked_now = decision.action is Action.MARK and notice.outcome.done
    return MARK_TAG_KEY in resource.tags or marked_now or decision.action is Action.STOP


def actions_for(notice: Notice, *, short: bool = False) -> ActionsBlock | None:
    """Mute this finding on every message; Keep running (for a chosen time) and Protect where costguard could
    stop the resource for this finding (_may_stop); Stop now only where it would stop it now (_stop_now_works):
    never in notify mode. None when a value would not fit Slack's limits (a hostile resource id)."""
    decision = notice.decision
    resource = decision.resource
    reason, key = decision.reason.value, resource.key
    try:
        _value(reason, key, max(h for h, _ in (*KEEP_HOURS, *MUTE_HOURS)))  # the longest value offered
    except ValueError:  # too long for Slack, or unreadable back (a hostile id): no buttons
        return None
    elements: list[Any] = []
    if _may_stop(notice):
        elements.append(
            StaticSelectElement(
                action_id=KEEP,
                placeholder="Keep running for…",
                options=[Option(text=label, value=_value(reason, key, h)) for h, label in KEEP_HOURS],
            )
        )
        if _stop_now_works(notice):
            elements.append(
                ButtonElement(
                    text="Stop now",
                    action_id=STOP_NOW,
                    value=_value(reason, key),
                    style="danger",
                    confirm=ConfirmObject(
                        title="Stop it now?",
                        text=PlainTextObject(
                            text=clip(
                                f"costguard stops {clean(resource.display_name)} through its policy.", 300
                            )
                        ),
                        confirm="Stop",
                        deny="Cancel",
                    ),
                )
            )
        if not short:
            elements.append(ButtonElement(text="Protect", action_id=PROTECT, value=_value(reason, key)))
    elements.append(
        StaticSelectElement(
            action_id=MUTE,
            placeholder="Mute this finding…",
            options=[Option(text=label, value=_value(reason, key, h)) for h, label in MUTE_HOURS],
        )
    )
    return ActionsBlock(elements=elements)


def build_reply(notice: Notice, *, owner: str | None = None) -> dict[str, Any]:
    """What follows in a conversation's thread: the new state in a line or two (who did it, when)."""
    decision = notice.decision
    when = decision.decided_at.strftime("%Y-%m-%d %H:%M UTC")
    lines = [safe_text(action_line(notice), ACTION_LIMIT)]
    if notice.actor and USER_ID.fullmatch(notice.actor):
        lines.append(f"Asked by <@{notice.actor}> at {when}.")
    else:
        lines.append(f"{safe_text(title_of(decision), SHORT_LIMIT)} at {when}.")
    if stopped(notice) and (restart := restart_line(decision.resource)):
        lines.append(restart)  # safe mrkdwn already
    if summary := safe_text(decision.finding.summary, 600):
        lines.append(summary)
    figure = figure_text(decision.finding)
    plain = f"costguard: {safe_text(title_of(decision), SHORT_LIMIT)}: {safe_text(decision.resource.display_name, NAME_LIMIT)}"
    return {
        "text": clip(f"{plain}: {figure}" if figure else plain, MAX_TEXT),
        "blocks": [SectionBlock(text=MarkdownTextObject(text=clip("\n".join(lines), MAX_SECTION))).to_dict()],
    }
