"""Block Kit messages: what was found, on what, what it costs, what was done, how to protect it.

The blocks are slack_sdk's Block Kit models, so Slack's limits are checked by the library as well; every string
from AWS or users still goes through escape() and clip() first.
"""

from __future__ import annotations

import math
import re
from typing import Any
from urllib.parse import quote

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
from costguard.notify.links import console_url, is_region
from costguard.notify.notice import ROWS_SHOWN, GroupNotice, Notice, kind_of
from costguard.notify.values import KEEP_MENU, MUTE_MENU, action_value
from costguard.policy import NOTIFY_ONLY, is_protected, snoozed_until

TITLES: dict[Reason, str] = {
    Reason.TRAINING_JOB_FAILED: "Training job failed",
    Reason.GPU_IDLE: "Idle GPU instance",
    Reason.GPU_STARVED: "Data-starved GPUs",
    Reason.GPU_METRICS_MISSING: "No GPU metrics",
    Reason.MEMBER_UNREACHABLE: "Member account not reachable",
    Reason.JOB_STALLED: "Training job stalled",
    Reason.NOTEBOOK_IDLE: "Idle GPU notebook",
    Reason.ENDPOINT_IDLE: "GPU endpoint with no traffic",
    Reason.ENDPOINT_UNDERUSED: "GPU endpoint serving a trickle",
    Reason.BATCH_RETRY_LOOP: "Batch job failing in a retry loop",
    Reason.SPOT_INTERRUPTION: "Spot instance being interrupted",
    Reason.JOB_FAILURE_LOOP: "Training job failing in a loop",
    Reason.JOB_COST_WARNING: "Training job nearing its cost ceiling",
    Reason.JOB_COST_CEILING: "Training job over its cost ceiling",
    Reason.TRAINING_DIVERGED: "Training run diverged",
    Reason.JOB_HUNG: "Training job hung",
    Reason.JOB_HANG_UNKNOWN: "Training job silent: hang cannot be told",
    Reason.CHECKPOINT_STALE: "Checkpoints stopped",
    Reason.JOB_NO_MAX_RUNTIME: "Training job without a sane max runtime",
    Reason.SPOT_WITHOUT_CHECKPOINT: "Spot training job without checkpoints",
    Reason.SPOT_RECOMMENDED: "Long on-demand training job: spot recommended",
    Reason.DATA_CROSS_REGION: "Training input read from another region",
    Reason.UNTAGGED_GPU_SPEND: "GPU launched without cost-allocation tags",
    Reason.TRAINING_DIGEST: "Daily training digest",
    Reason.CAPACITY_RESERVATION_IDLE: "Capacity reservation paid for but unused",
    Reason.BEDROCK_THROUGHPUT_IDLE: "Bedrock Provisioned Throughput nobody invokes",
    Reason.CAPACITY_BLOCK_EXPIRING: "Capacity Block ending: checkpoint now",
    Reason.CAPACITY_BLOCK_UNUSED: "Capacity Block paid for with nothing running",
    Reason.CAPACITY_RESERVATION_STATE: "Capacity reservation state change",
    Reason.BUDGET_BREACH: "Budget breached: what is burning money now",
    Reason.COST_ANOMALY: "Cost anomaly",
    Reason.COSTGUARD_ALARM: "costguard itself needs attention",
    Reason.POD_GPU_IDLE: "Kubernetes pods holding idle GPUs",
    Reason.POD_GPU_STARVED: "Kubernetes pods with data-starved GPUs",
    Reason.GPU_NODE_UNUSED: "GPU node kept alive with no GPU pod",
    Reason.EKS_CLUSTER_UNREACHABLE: "EKS cluster costguard cannot reach",
    Reason.HYPERPOD_NODE_UNHEALTHY: "HyperPod node that cannot work",
    Reason.HYPERPOD_CLUSTER_FAILED: "HyperPod cluster failed or stuck creating",
    Reason.HYPERPOD_PROVISIONING_FAILED: "HyperPod could not provision a node",
    Reason.HYPERPOD_IDLE: "HyperPod instance group with idle GPUs",
    Reason.GPU_METRICS_PARTIAL: "GPU metrics missing for some GPUs",
    Reason.GPU_ALARM_UNMATCHED: "GPU-idle alarm for an instance that is gone",
    Reason.GPU_ACTIVE_AGAIN: "GPU instance at work again",
    Reason.RIGHTSIZE_IDLE: "Idle all window: stop it",
    Reason.RIGHTSIZE_DOWNSIZE: "Fewer GPUs would do",
    Reason.RIGHTSIZE_FAMILY: "A cheaper GPU family would do",
    Reason.RIGHTSIZE_MODEL_SIZE: "Sized above its model's needs",
    Reason.RIGHTSIZE_SPOT: "Checkpointed work on on-demand: spot would do",
    Reason.TRAINIUM_CANDIDATE: "Transformer training Trainium could take",
    Reason.COMMITMENT_CANDIDATE: "Steady GPU use a Savings Plan could cover",
    Reason.ORPHANED_STORAGE: "Storage GPU work left behind",
}

_TITLE_OF_CODE = {reason.value: title for reason, title in TITLES.items()}  # a group counts by reason code
# What a resource of each kind is called in a sentence: one, and several.
_KIND_NOUNS: dict[ResourceKind, tuple[str, str]] = {
    ResourceKind.EC2_INSTANCE: ("EC2 instance", "EC2 instances"),
    ResourceKind.TRAINING_JOB: ("training job", "training jobs"),
    ResourceKind.NOTEBOOK: ("notebook instance", "notebook instances"),
    ResourceKind.ENDPOINT: ("endpoint", "endpoints"),
    ResourceKind.CAPACITY_RESERVATION: ("capacity reservation", "capacity reservations"),
    ResourceKind.PROVISIONED_THROUGHPUT: ("Provisioned Throughput", "Provisioned Throughputs"),
    ResourceKind.BATCH_JOB: ("Batch job", "Batch jobs"),
    ResourceKind.BATCH_QUEUE: ("Batch queue", "Batch queues"),
    ResourceKind.JOB_FAMILY: ("job family", "job families"),
    ResourceKind.TRAINING_DIGEST: ("training digest", "training digests"),
    ResourceKind.BUDGET: ("budget", "budgets"),
    ResourceKind.COST_ANOMALY: ("cost anomaly", "cost anomalies"),
    ResourceKind.COSTGUARD_ALARM: ("costguard alarm", "costguard alarms"),
    ResourceKind.MEMBER_REGION: ("member account and region", "member accounts and regions"),
    ResourceKind.EKS_WORKLOAD: ("Kubernetes workload", "Kubernetes workloads"),
    ResourceKind.EKS_NODE: ("GPU node", "GPU nodes"),
    ResourceKind.EKS_CLUSTER: ("EKS cluster", "EKS clusters"),
    ResourceKind.HYPERPOD_CLUSTER: ("HyperPod cluster", "HyperPod clusters"),
    ResourceKind.HYPERPOD_NODE: ("HyperPod node", "HyperPod nodes"),
    ResourceKind.HYPERPOD_GROUP: ("HyperPod instance group", "HyperPod instance groups"),
}


def kind_noun(kind: ResourceKind | None, count: int = 1) -> str:
    one, several = _KIND_NOUNS.get(kind, ("resource", "resources")) if kind else ("resource", "resources")
    return one if count == 1 else several


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


def account_text(account: str, name: str | None = None) -> str:
    """An AWS account id is 12 digits; anything else is shown as what it is, escaped. With the organization's
    name for it: ``research (222222222222)``."""
    if not _ACCOUNT.fullmatch(account):
        return f"invalid account id `{_code(account, 40)}`"
    return f"{_text(name, _SHORT)} ({account})" if name and name.strip() else account


def resource_account(resource: Resource) -> str:
    """The resource's account as a message names it: its name in the organization where known."""
    return account_text(resource.account, resource.account_name)


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
_INSTANCE_KINDS = frozenset(
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
            lines.append(f"• {_text(label, _SHORT)}: {_text(_plain(value, unit), _EVIDENCE_VALUE)}")
            continue
        lines.append(f"• {_text(label, _SHORT)}:")
        lines.extend(f"    ◦ {_text(item, _EVIDENCE_VALUE)}" for item in items[:_MAX_ITEMS])
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
    rid, region = _code(resource.id, _NAME), _code(resource.region, _SHORT)
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


def _figure(finding: Finding) -> str:
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
    """What a finding's cost_usd is: an anomaly's is its impact above the expected spend."""
    return "impact" if finding.resource.kind is ResourceKind.COST_ANOMALY else "spent"


def _cost_label(resource: Resource) -> str:
    """The cost field's label: what its figure is for, when a resource runs on several instances."""
    if resource.instance_count > 1:
        return f"Cost per hour ({resource.instance_count} instances)"
    return "Cost per hour"


def _type_field(resource: Resource) -> str:
    kind = _text(resource.instance_type or "unknown", _SHORT)
    if resource.kind is ResourceKind.EC2_INSTANCE and resource.instance_count == 1:
        return f"*Type*\n{kind}"
    return f"*Type*\n{kind} x {resource.instance_count}"


def _context(notice: Notice) -> list[str]:
    resource = notice.decision.resource
    key = _code(notice.protect_tag_key, _TAG_KEY)
    elements = []
    if resource.kind in _INSTANCE_KINDS:
        tags = (
            ", ".join(
                f"`{_code(k, _TAG_KEY)}={_code(v, _TAG_VALUE)}`"
                for k, v in sorted(resource.tags.items())[:12]
            )
            or "none"
        )
        elements.append(clip(f"Tags: {tags}", _TAGS))
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
    account, region = resource_account(resource), _text(resource.region, _SHORT)
    on_instances = resource.kind in _INSTANCE_KINDS
    fields = [f"*Resource*\n{_resource_link(console_url(resource), _text(resource.display_name, _NAME))}"]
    if on_instances:
        fields.append(_type_field(resource))
    fields.append(f"*Account / region*\n{account} / {region}")
    if shown_owner := owner_text(resource, owner):
        fields.append(f"*Owner*\n{shown_owner}")
    # A budget's or an anomaly's $/h is what runs in its scope (its summary says so), never its own cost.
    if resource.kind.has_own_rate:
        fields.append(f"*{_cost_label(resource)}*\n{_money(finding.hourly_usd, '/h')}")
    if finding.cost_usd is not None:
        fields.append(f"*{_spent_word(finding).capitalize()}*\n{_money(finding.cost_usd)}")
    fields.append(f"*Reason code*\n`{_code(decision.reason.value, _SHORT)}`")
    # What the fields (or the summary) already say is not repeated in the evidence.
    shown = {"instance_type": resource.instance_type, "instance_count": resource.instance_count}
    skip = frozenset(k for k, v in shown.items() if on_instances and finding.evidence.get(k) == v)
    if resource.kind in _LISTED_IN_SUMMARY:
        skip |= {"ranked"}
    if finding.cost_usd is not None and finding.evidence.get("total_impact_usd") == finding.cost_usd:
        skip |= {"total_impact_usd"}  # the Impact field
    evidence = _evidence_lines(finding.evidence, skip)
    action = _text(action_line(notice), _ACTION)
    if notice.actor and _USER_ID.fullmatch(notice.actor):  # a person asked for it (a button in Slack)
        action = f"{action}\nAsked by <@{notice.actor}> at {decision.decided_at:%Y-%m-%d %H:%M UTC}."
    if asked(notice) is not None:  # the button's finding, said as what it was, not as the verdict now
        action = f"{action}\nAsked from its message about: {_text(title_of(decision), _SHORT)}."
    if stopped(notice) and (restart := restart_line(resource)):
        action = f"{action}\n{restart}"
    blocks: list[Block] = [
        HeaderBlock(text=PlainTextObject(text=_text(f"costguard: {title}", MAX_HEADER))),
        # Slack refuses an empty text: a finding without a summary says so.
        SectionBlock(text=MarkdownTextObject(text=_text(finding.summary, MAX_SECTION) or "(no summary)")),
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
    name = _text(resource.display_name, _NOTIFICATION_NAME)
    figure = _figure(finding)
    text = f"costguard: {_text(title_of(decision), _SHORT)}: {name} ({account}/{region})"
    text = clip(f"{text}: {figure}" if figure else text, MAX_TEXT)
    return {"text": text, "blocks": [block.to_dict() for block in blocks]}


# -- owners, buttons, replies and groups ------------------------------------------------------------------------

OWNER_TAG = "owner"
_USER_ID = re.compile(r"[UW][A-Z0-9]{8,}")
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
    if mention and _USER_ID.fullmatch(mention):
        return f"<@{mention}>"
    tag = resource.tags.get(OWNER_TAG, "").strip()
    if not tag:
        return None
    if _USER_ID.fullmatch(tag):
        return f"<@{tag}>"
    return _text(tag, _SHORT)


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
    lines = [_text(action_line(notice), _ACTION)]
    if notice.actor and _USER_ID.fullmatch(notice.actor):
        lines.append(f"Asked by <@{notice.actor}> at {when}.")
    else:
        lines.append(f"{_text(title_of(decision), _SHORT)} at {when}.")
    if stopped(notice) and (restart := restart_line(decision.resource)):
        lines.append(restart)  # safe mrkdwn already
    if summary := _text(decision.finding.summary, 600):
        lines.append(summary)
    figure = _figure(decision.finding)
    plain = f"costguard: {_text(title_of(decision), _SHORT)}: {_text(decision.resource.display_name, _NAME)}"
    return {
        "text": clip(f"{plain}: {figure}" if figure else plain, MAX_TEXT),
        "blocks": [SectionBlock(text=MarkdownTextObject(text=clip("\n".join(lines), MAX_SECTION))).to_dict()],
    }


def _row_figure(notice: Notice) -> str:
    """A row's dollar figure: a resource's own $/h; a family's or a digest's own figure, never a $/h of theirs."""
    finding = notice.decision.finding
    if finding.resource.kind.has_own_rate:
        return _money(finding.hourly_usd, "/h")
    return _text(_figure(finding), 80)


def _row_title(notice: Notice) -> str:
    """A row's title: a click told back says what was done and, apart, the finding its button was on."""
    done = asked(notice)
    if done is None or done == "muted":
        return headline(notice)
    return f"{done.capitalize()} (asked from: {title_of(notice.decision)})"


def _row_line(notice: Notice, owner: str | None) -> str:
    decision = notice.decision
    resource = decision.resource
    parts = [f"*{_resource_link(console_url(resource), _text(resource.display_name, 120))}*"]
    if resource.kind in _INSTANCE_KINDS and resource.instance_type:
        count = "" if resource.instance_count == 1 else f" x {resource.instance_count}"
        parts.append(f"{_text(resource.instance_type, 40)}{count}")
    if resource.account_name:  # an organization: whose account and where
        parts.append(f"{resource_account(resource)} {_text(resource.region, _SHORT)}")
    if figure := _row_figure(notice):
        parts.append(figure)
    parts.append(_text(_row_title(notice), 120))
    parts.append(_text(action_line(notice).split(" ", 1)[-1], 300))
    if shown := owner_text(resource, owner):
        parts.append(f"owner {shown}")
    if notice.actor and _USER_ID.fullmatch(notice.actor):
        parts.append(f"asked by <@{notice.actor}> at {decision.decided_at:%H:%M UTC}")
    return " · ".join(parts)


def _brief_line(notice: Notice) -> str:
    name = _text(notice.decision.resource.display_name, 80)
    title = _text(_row_title(notice), 100)
    figure = _row_figure(notice)
    return f"{name} · {figure} · {title}" if figure else f"{name} · {title}"


def group_title(by_reason: dict[str, int], count: int, resources: int, kind: ResourceKind | None) -> str:
    """What a group is about, in words: "Idle GPU instance: 3 EC2 instances" for one verdict, "7 findings on 5
    EC2 instances" for several (never a reason code, never a bare count)."""
    many = resources or count
    things = f"{many} {kind_noun(kind, many)}"
    if len(by_reason) == 1:
        [reason] = by_reason
        return f"{_TITLE_OF_CODE.get(reason, reason.replace('_', ' '))}: {things}"
    return f"{count} findings on {things}"


def build_group_message(
    group: GroupNotice,
    *,
    owners: dict[str, str] | None = None,
    interactive: bool = False,
    more_link: str | None = None,
) -> dict[str, Any]:
    """Many findings of one resource kind for one channel as one message: totals, the costliest first (type,
    $/h, verdict, action, owner), each row with its own buttons, "and N more". The total counts each resource
    once, at its own hourly price (the group's tally); kinds without a price of their own have no total."""
    owners = owners or {}
    verdicts = ", ".join(f"{_text(_TITLE_OF_CODE.get(r, r), 80)} {n}" for r, n in group.by_reason.items())
    kind = kind_of(group)
    title = group_title(group.by_reason, group.count, group.resource_count, kind)
    if group.digest:
        title = f"Still open after a day: {title}"
    priced = group.resource_count > 0 or any(r.decision.resource.kind.has_own_rate for r in group.rows)
    summary = f"*{group.count} findings*"
    if group.resource_count:
        summary += f" on {group.resource_count} {kind_noun(kind, group.resource_count)}"
    if priced:
        unpriced = f" ({group.unpriced} with no known price)" if group.unpriced else ""
        summary += f" costing *${group.hourly_total_usd:,.2f}/h* together{unpriced}"
    summary = f"{summary}: {verdicts}."
    if group.digest:
        summary = f"{summary}\nEach was told when it was first seen and is still open; it is not told again on its own."
    blocks: list[Block] = [
        HeaderBlock(text=PlainTextObject(text=clip(f"costguard: {title}", MAX_HEADER))),
        SectionBlock(text=MarkdownTextObject(text=clip(summary, MAX_SECTION))),
    ]
    shown = group.rows[:ROWS_SHOWN]
    for row in shown:
        line = _row_line(row, owners.get(row.decision.resource.key))
        blocks.append(SectionBlock(text=MarkdownTextObject(text=clip(line, MAX_SECTION))))
        if interactive and (buttons := actions_for(row)):  # a row's buttons are its own card's
            blocks.append(buttons)
    # The next ones in brief (name, $/h, verdict), a section per 20 lines; only the rest is "and N more".
    brief = group.rows[ROWS_SHOWN : ROWS_SHOWN + ROWS_BRIEF]
    for start in range(0, len(brief), 20):
        lines = [f"• {_brief_line(row)}" for row in brief[start : start + 20]]
        blocks.append(SectionBlock(text=MarkdownTextObject(text=clip("\n".join(lines), MAX_SECTION))))
    rest = group.count - len(shown) - len(brief)
    if rest > 0:
        where = (
            f"<{more_link}|the full list>"
            if more_link and _SAFE_LOG_URL.fullmatch(more_link)
            else "the full list"
        )
        note = f"… and {rest} more, cheaper ones: {where} is in the log of the function that found them."
        if not group.source:
            note = f"… and {rest} more, cheaper ones."
        blocks.append(ContextBlock(elements=[MarkdownTextObject(text=clip(note, MAX_CONTEXT))]))
    first = shown[0].decision.resource if shown else None
    one_place = len({(n.decision.resource.account, n.decision.resource.region) for n in group.rows}) == 1
    where_text = f" ({resource_account(first)}/{_text(first.region, _SHORT)})" if first and one_place else ""
    text = f"costguard: {group.count} findings{where_text}"
    if priced:
        text = f"{text}: ${group.hourly_total_usd:,.2f}/h"
    return {"text": clip(text, MAX_TEXT), "blocks": [block.to_dict() for block in blocks]}


_SAFE_LOG_URL = re.compile(
    r"https://[a-z0-9-]+\.console\.aws\.amazon\.com/cloudwatch/home\?[A-Za-z0-9/?#=:%._~+$-]*"
)


def log_link(region: str, log_group: str, run_id: str) -> str | None:
    """The CloudWatch console's view of a log group filtered on a run's id (where a group's rows are logged)."""
    if not is_region(region) or not log_group:
        return None

    def console(text: str) -> str:  # the console's own escaping of a fragment: % written as $25
        return quote(quote(text, safe=""), safe="").replace("%", "$")

    return (
        f"https://{region}.console.aws.amazon.com/cloudwatch/home?region={region}#logsV2:log-groups/log-group/"
        f"{console(log_group)}/log-events$3FfilterPattern$3D{console(run_id)}"
    )
