"""`costguard doctor`: whether an account and region give costguard what it needs, read-only, and what a first
sweep would find there.

With the credentials of the default boto3 session (as `costguard backtest --live` reads), for one region:

- GPU metrics: each running NVIDIA GPU instance (InService GPU notebook) publishes the CloudWatch agent's
  ``nvidia_smi_utilization_gpu`` series named by its InstanceId (NotebookInstanceName), one per GPU, and each
  in-progress GPU training job's hosts publish SageMaker's ``GPUUtilization``; what is missing comes with its fix.
- Budget alerts: the stack's cost-alerts topic (its CostAlertsTopicArn output, else ``<stack>-cost-alerts``) is
  subscribed by the stack's budgets function, and which budgets notify it.
- Slack: the stack's secret (its SlackWebhookSecretArn output) is filled in and valid in form; never printed.
- GPU-idle alarms: with the stack's GpuAlarms=on, the Metrics Insights alarms it needs against the quota.
- Remediation: the stack's ReasonModes and RemediateScope as deployed, a sentence each (which reasons would stop
  resources, which teams are out of scope); a value the functions would refuse at start-up is to fix.
- A first sweep: the GPU and SageMaker sweeps' findings on what was read, and what the stack's mode would decide.

``read_account`` makes the AWS calls (every one within ``DOCTOR_POLICY``: reads only); ``build_report`` and
``render`` are pure. A check that cannot be read says why and the others go on.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, TypeVar

from costguard.aws import clients, inventory, quotas
from costguard.aws import metrics as cloudwatch_metrics
from costguard.aws import sagemaker as sagemaker_reads
from costguard.aws.alarms import ALARM_PREFIX
from costguard.aws.metrics import GPU_METRIC, GPU_NAMESPACE, Dimensions
from costguard.aws.price_list import PERMISSIONS as LIVE_PRICE_PERMISSIONS
from costguard.aws.sagemaker import NOTEBOOK_DIMENSION, TRAINING_GPU_METRIC, TRAINING_NAMESPACE
from costguard.detect.gpu import AGENT_HELP, PARTIAL_HELP, thresholds_from
from costguard.detect.sagemaker import JOB_METRICS_HELP, NOTEBOOK_AGENT_HELP
from costguard.local.aws_errors import ends_the_run, explain
from costguard.local.remediation_reach import (
    REASON_MODES_FIX,
    SCOPE_FIX,
    acting_reasons,
    reasons_sentence,
    scope_sentence,
)
from costguard.local.terminal import printable
from costguard.model import (
    Accelerators,
    Action,
    Decision,
    Ec2Instance,
    Endpoint,
    Finding,
    NotebookInstance,
    Resource,
    TrainingJob,
)
from costguard.notify.routing import SecretFormatError, parse_routes
from costguard.permissions import needs, read_only_policy
from costguard.policy import PolicyError
from costguard.settings import Settings, SettingsError, parse_settings

RECENT = "PT3H"  # ListMetrics' RecentlyActive: what publishes now, as the sweep lists it

DOCTOR_PERMISSIONS = (
    needs(
        "sts:GetCallerIdentity",
        "cloudformation:DescribeStacks",
        "sns:ListSubscriptionsByTopic",
        # DescribeBudgets, DescribeNotificationsForBudget and DescribeSubscribersForNotification.
        "budgets:ViewBudget",
        "cloudwatch:DescribeAlarms",
    )
    | inventory.PERMISSIONS
    | sagemaker_reads.INVENTORY_PERMISSIONS
    | cloudwatch_metrics.READ_PERMISSIONS
    | cloudwatch_metrics.LIST_PERMISSIONS
    | quotas.PERMISSIONS
    | LIVE_PRICE_PERMISSIONS  # with PriceSource=live, the sweep's prices
)
SECRET_PERMISSIONS = needs("secretsmanager:GetSecretValue")  # the Slack secret, to say whether it is filled
# A secret the stack created carries CloudFormation's own tag of the stack's name (AWS writes it, nobody else
# can): the doctor may read the secret of a stack named costguard* and no other. A secret of your own
# (SlackWebhookSecretArn): add its ARN to the statement.
SECRET_STATEMENT = {
    "Sid": "CostguardDoctorReadsTheStacksSlackSecret",
    "Effect": "Allow",
    "Action": sorted(SECRET_PERMISSIONS),
    "Resource": "arn:aws:secretsmanager:*:*:secret:*",
    "Condition": {"StringLike": {"secretsmanager:ResourceTag/aws:cloudformation:stack-name": "costguard*"}},
}
# What `costguard doctor --print-policy` prints: attach it to the role or user the doctor runs as. Every read on
# any resource, but the Slack secret's, which only the stack's own.
DOCTOR_POLICY = read_only_policy("CostguardDoctorReadOnly", DOCTOR_PERMISSIONS)
DOCTOR_POLICY["Statement"].append(SECRET_STATEMENT)

T = TypeVar("T")


# -- what was read ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Unread:
    """A read that failed, and why, in a sentence."""

    why: str


class NotThere(Exception):
    """What the doctor looked for is not in the account (a stack, a topic): the message says what to do."""


@dataclass(frozen=True)
class StackFacts:
    name: str
    parameters: dict[str, str]
    outputs: dict[str, str]


@dataclass(frozen=True)
class Subscription:
    protocol: str
    endpoint: str
    confirmed: bool


@dataclass(frozen=True)
class TopicFacts:
    arn: str
    subscriptions: tuple[Subscription, ...]


@dataclass(frozen=True)
class BudgetAlerts:
    """A budget and its alerts: each notification in words (``ACTUAL > 80%``) with its SNS subscribers."""

    name: str
    alerts: tuple[tuple[str, tuple[str, ...]], ...] = ()


class SecretForm(StrEnum):
    FILLED = "filled"
    UNFILLED = "unfilled"
    MALFORMED = "malformed"


@dataclass(frozen=True)
class SecretState:
    """What the Slack secret holds, in words that never quote it."""

    form: SecretForm
    says: str


@dataclass(frozen=True)
class AlarmFacts:
    """The Metrics Insights alarms of the region (costguard's among them) and the quota on them."""

    quota: quotas.Quota | Unread | None
    insights_alarms: int
    costguard_alarms: int


@dataclass(frozen=True)
class SweepFacts:
    mode: str
    findings: tuple[Finding, ...]
    decisions: tuple[Decision, ...]


@dataclass
class AccountFacts:
    """Everything the doctor read of one account and region."""

    account: str
    region: str
    now: datetime
    stack_name: str
    stack: StackFacts | Unread
    instances: list[Ec2Instance] | Unread
    notebooks: list[NotebookInstance] | Unread
    jobs: list[TrainingJob] | Unread
    gpu_series: list[Dimensions] | Unread
    job_hosts: set[str] | Unread
    topic: TopicFacts | Unread
    budgets: list[BudgetAlerts] | Unread
    secret: SecretState | Unread
    alarms: AlarmFacts | Unread | None  # None: GpuAlarms is off
    sweep: SweepFacts | Unread
    api_calls: dict[str, int] = field(default_factory=dict)

    @property
    def parameters(self) -> dict[str, str]:
        return self.stack.parameters if isinstance(self.stack, StackFacts) else {}

    @property
    def outputs(self) -> dict[str, str]:
        return self.stack.outputs if isinstance(self.stack, StackFacts) else {}

    @property
    def topic_arn(self) -> str:
        return self.outputs.get("CostAlertsTopicArn") or topic_arn(self.region, self.account, self.stack_name)


def topic_arn(region: str, account: str, stack: str) -> str:
    """The cost-alerts topic's ARN: template.yaml names it ``${AWS::StackName}-cost-alerts``."""
    return f"arn:aws:sns:{region}:{account}:{stack}-cost-alerts"


# -- the report ------------------------------------------------------------------------------------


class Status(StrEnum):
    OK = "ok"
    FIX = "fix"  # something to set up or repair
    NOTE = "note"  # worth knowing; nothing to fix
    UNKNOWN = "unknown"  # could not be read


@dataclass(frozen=True)
class Check:
    area: str
    status: Status
    subject: str
    says: str
    fix: str | None = None


@dataclass(frozen=True)
class SweepLine:
    reason: str
    resource: str
    action: str
    summary: str


@dataclass
class DoctorReport:
    account: str
    region: str
    stack: str
    mode: str
    now: datetime
    checks: list[Check]
    sweep: list[SweepLine] | str  # a sentence when the sweep could not run
    api_calls: dict[str, int] = field(default_factory=dict)
    acting: list[str] | None = None  # the reasons in remediate that act (Mode, ReasonModes); None: unknown

    @property
    def to_fix(self) -> list[Check]:
        return [c for c in self.checks if c.status is Status.FIX]

    @property
    def unknown(self) -> list[Check]:
        return [c for c in self.checks if c.status is Status.UNKNOWN]

    @property
    def exit_code(self) -> int:
        """0 when every check passed; 1 when something is to fix or could not be read."""
        return 1 if self.to_fix or self.unknown else 0

    def as_json(self) -> dict[str, Any]:
        return {
            "account": self.account,
            "region": self.region,
            "stack": self.stack,
            "mode": self.mode,
            "now": self.now.isoformat(),
            "checks": [
                {"area": c.area, "status": c.status.value, "subject": c.subject, "says": c.says, "fix": c.fix}
                for c in self.checks
            ],
            "sweep": self.sweep if isinstance(self.sweep, str) else [line.__dict__ for line in self.sweep],
            "acting_reasons": self.acting,
            "api_calls": self.api_calls,
        }


GPU_METRICS = "GPU metrics"
BUDGET_ALERTS = "Budget alerts"
SLACK = "Slack"
GPU_ALARMS = "GPU-idle alarms"
STACK = "Stack"
REMEDIATION = "Remediation"


def build_report(facts: AccountFacts) -> DoctorReport:
    """The checks and the sweep's lines, from what was read."""
    checks = [*stack_checks(facts), *remediation_checks(facts), *metric_checks(facts), *budget_checks(facts)]
    checks += slack_checks(facts) + alarm_checks(facts)
    mode = facts.sweep.mode if isinstance(facts.sweep, SweepFacts) else facts.parameters.get("Mode", "notify")
    try:
        acting: list[str] | None = [
            r.value
            for r in acting_reasons(
                facts.parameters.get("Mode", mode), facts.parameters.get("ReasonModes", "")
            )
        ]
    except PolicyError:
        acting = None
    return DoctorReport(
        account=facts.account,
        region=facts.region,
        stack=facts.stack_name,
        mode=mode,
        now=facts.now,
        checks=checks,
        sweep=sweep_lines(facts.sweep),
        api_calls=facts.api_calls,
        acting=acting,
    )


def stack_checks(facts: AccountFacts) -> list[Check]:
    if isinstance(facts.stack, Unread):
        return [Check(STACK, Status.UNKNOWN, facts.stack_name, facts.stack.why)]
    organization = facts.parameters.get("OrganizationId")
    hub = f", the hub of organization {organization}" if organization else ""
    return [
        Check(
            STACK,
            Status.OK,
            facts.stack_name,
            f"deployed in {facts.region} in {facts.parameters.get('Mode', 'notify')} mode{hub}",
        )
    ]


def remediation_checks(facts: AccountFacts) -> list[Check]:
    """ReasonModes and RemediateScope as deployed (the stack's parameters): which reasons would stop resources,
    and which teams are out of scope, a sentence each; a value that does not read is to fix."""
    if isinstance(facts.stack, Unread):
        return []  # the stack check says why
    mode = facts.parameters.get("Mode", "notify")
    read = [
        r.tags
        for listed in (facts.instances, facts.notebooks, facts.jobs)
        if isinstance(listed, list)
        for r in listed
    ]
    told: tuple[tuple[str, Callable[[str], str], str], ...] = (
        ("ReasonModes", lambda text: reasons_sentence(mode, text), REASON_MODES_FIX),
        ("RemediateScope", lambda text: scope_sentence(text, read), SCOPE_FIX),
    )
    checks = []
    for name, words, fix in told:
        if name not in facts.parameters:
            says = f"the stack has no {name} parameter (deployed before it existed), so: {words('')}"
            checks.append(Check(REMEDIATION, Status.NOTE, name, says))
            continue
        text = facts.parameters[name]
        try:
            checks.append(Check(REMEDIATION, Status.OK, name, words(text)))
        except PolicyError as error:
            says = (
                f"{text!r} does not read ({error}): every function of the stack checks it at start-up and refuses "
                "to start, so nothing is swept, decided or told until it is fixed"
            )
            checks.append(Check(REMEDIATION, Status.FIX, name, says, fix))
    return checks


def _indices(series: Iterable[Dimensions], dimension: str, name: str) -> set[str]:
    """The GPU numbers (``index``) of the series named by ``dimension`` = ``name``."""
    found = set()
    for dims in series:
        named = dict(dims)
        if named.get(dimension) == name:
            found.add(named.get("index", ""))
    return found


def _gpus(count: int) -> str:
    return f"{count} GPU" + ("s" if count != 1 else "")


def _agent_fix(instance: Ec2Instance, tag_key: str) -> str:
    if tag_key and tag_key in instance.tags:
        return (
            f"It carries {tag_key}, so the stack's State Manager association should install the agent: look at "
            "the association's last run (Systems Manager, State Manager) and the agent's log. " + AGENT_HELP
        )
    if tag_key:
        return (
            f"Tag it {tag_key} (the stack's State Manager association installs the agent), or: {AGENT_HELP}"
        )
    return AGENT_HELP


def metric_checks(facts: AccountFacts) -> list[Check]:
    """Each GPU resource: its GPU series as the sweep reads them, or what to install."""
    checks: list[Check] = []
    series = facts.gpu_series
    for what, read in (("instances", facts.instances), ("notebooks", facts.notebooks), ("jobs", facts.jobs)):
        if isinstance(read, Unread):
            checks.append(Check(GPU_METRICS, Status.UNKNOWN, f"GPU {what}", read.why))
    if isinstance(series, Unread):
        checks.append(Check(GPU_METRICS, Status.UNKNOWN, "the CloudWatch agent's GPU series", series.why))
        series = []
    tag_key = facts.parameters.get("GpuAgentTagKey", "")
    unnamed = sorted(
        {
            dict(d).get("host", "?")
            for d in series
            if "InstanceId" not in dict(d) and NOTEBOOK_DIMENSION not in dict(d)
        }
    )
    for instance in facts.instances if isinstance(facts.instances, list) else []:
        checks.append(_instance_check(instance, series, tag_key, unnamed))
    for notebook in facts.notebooks if isinstance(facts.notebooks, list) else []:
        checks.append(_notebook_check(notebook, series))
    hosts = facts.job_hosts if isinstance(facts.job_hosts, set) else None
    if isinstance(facts.job_hosts, Unread):
        checks.append(
            Check(GPU_METRICS, Status.UNKNOWN, "SageMaker's training-job GPU series", facts.job_hosts.why)
        )
    for job in facts.jobs if isinstance(facts.jobs, list) else []:
        if hosts is not None:
            checks.append(_job_check(job, hosts, facts))
    if not any(c.area == GPU_METRICS for c in checks):
        checks.append(
            Check(
                GPU_METRICS,
                Status.OK,
                facts.region,
                "no running GPU instance, InService GPU notebook or in-progress GPU training job to check",
            )
        )
    return checks


def _instance_check(
    instance: Ec2Instance, series: list[Dimensions], tag_key: str, unnamed: list[str]
) -> Check:
    subject = (
        f"instance {instance.id}" + (f" {instance.name}" if instance.name else "") + f" ({instance.type})"
    )
    accelerators = instance.accelerators
    if accelerators is None or not accelerators.is_nvidia:
        kind = accelerators.kind if accelerators else "no"
        return Check(
            GPU_METRICS, Status.NOTE, subject, f"not judged: its accelerators ({kind}) are not NVIDIA GPUs"
        )
    count = accelerators.count
    reporting = _indices(series, "InstanceId", instance.id)
    if not reporting:
        says = (
            f"publishes no {GPU_METRIC} series with an InstanceId dimension ({_gpus(count)}): costguard cannot "
            "tell whether it is idle, and will never call it idle"
        )
        if unnamed:
            says += (
                f"; {len(unnamed)} host(s) publish GPU series without an InstanceId ({', '.join(unnamed[:5])}): "
                "if one is this instance, its agent lacks append_dimensions InstanceId"
            )
        return Check(GPU_METRICS, Status.FIX, subject, says, _agent_fix(instance, tag_key))
    silent = [str(i) for i in range(count) if str(i) not in reporting]
    if silent:
        return Check(
            GPU_METRICS,
            Status.FIX,
            subject,
            f"{len(reporting)} of its {_gpus(count)} publish {GPU_METRIC}; GPU {', '.join(silent)} do not: "
            "costguard will not call it idle",
            PARTIAL_HELP,
        )
    return Check(GPU_METRICS, Status.OK, subject, _all_publish(count))


def _all_publish(count: int) -> str:
    return f"its GPU publishes {GPU_METRIC}" if count == 1 else f"all {count} GPUs publish {GPU_METRIC}"


def _notebook_check(notebook: NotebookInstance, series: list[Dimensions]) -> Check:
    subject = f"notebook {notebook.name} ({notebook.instance_type})"
    count = notebook.accelerators.count if notebook.accelerators else 1
    reporting = _indices(series, NOTEBOOK_DIMENSION, notebook.name)
    if not reporting:
        return Check(
            GPU_METRICS,
            Status.FIX,
            subject,
            f"publishes no {GPU_METRIC} series with a {NOTEBOOK_DIMENSION} dimension ({_gpus(count)}): "
            "SageMaker publishes none for notebooks, and costguard will never call it idle",
            NOTEBOOK_AGENT_HELP,
        )
    silent = [str(i) for i in range(count) if str(i) not in reporting]
    if silent:
        return Check(
            GPU_METRICS,
            Status.FIX,
            subject,
            f"{len(reporting)} of its {_gpus(count)} publish {GPU_METRIC}; GPU {', '.join(silent)} do not",
            PARTIAL_HELP,
        )
    return Check(GPU_METRICS, Status.OK, subject, _all_publish(count))


def _job_check(job: TrainingJob, hosts: set[str], facts: AccountFacts) -> Check:
    subject = f"training job {job.name} ({job.instance_count} x {job.instance_type})"
    expected = [f"{job.name}/algo-{n}" for n in range(1, job.instance_count + 1)]
    reporting = [h for h in expected if h in hosts]
    metric = f"{TRAINING_GPU_METRIC} in {TRAINING_NAMESPACE}"
    if len(reporting) == len(expected):
        return Check(GPU_METRICS, Status.OK, subject, f"every host publishes {metric}")
    if reporting:
        return Check(
            GPU_METRICS,
            Status.NOTE,
            subject,
            f"{len(reporting)} of its {len(expected)} hosts publish {metric}",
        )
    minutes = int((facts.now - job.started).total_seconds() // 60) if job.started else None
    window = _idle_window(facts)
    if minutes is not None and minutes < window:
        return Check(
            GPU_METRICS,
            Status.NOTE,
            subject,
            f"no {metric} yet: it started {minutes} minutes ago, and SageMaker publishes from its Training phase",
        )
    return Check(GPU_METRICS, Status.FIX, subject, f"its hosts publish no {metric}", JOB_METRICS_HELP)


def _idle_window(facts: AccountFacts) -> int:
    try:
        return int(facts.parameters.get("IdleWindowMinutes", "") or 30)
    except ValueError:
        return 30


def _budgets_function(facts: AccountFacts) -> str | None:
    return facts.outputs.get("BudgetsFunctionName")


def budget_checks(facts: AccountFacts) -> list[Check]:
    """The topic's subscription by the stack's budgets function, and the budgets that notify the topic."""
    checks: list[Check] = []
    arn = facts.topic_arn
    if isinstance(facts.topic, Unread):
        checks.append(Check(BUDGET_ALERTS, Status.UNKNOWN, f"topic {arn}", facts.topic.why))
    else:
        function = _budgets_function(facts)
        lambdas = [s for s in facts.topic.subscriptions if s.protocol == "lambda"]
        ours = [s for s in lambdas if function is None or s.endpoint.endswith(f":function:{function}")]
        others = [s for s in facts.topic.subscriptions if s not in ours]
        if ours:
            who = f"the stack's budgets function {function}" if function else "a Lambda function"
            checks.append(Check(BUDGET_ALERTS, Status.OK, f"topic {arn}", f"subscribed by {who}"))
        else:
            checks.append(
                Check(
                    BUDGET_ALERTS,
                    Status.FIX,
                    f"topic {arn}",
                    "no subscription of the stack's budgets function: alerts published here reach nothing of "
                    "costguard's",
                    "Deploy the stack again (`sam deploy`): the budgets function's SNS event source subscribes it.",
                )
            )
        for sub in others:
            state = "confirmed" if sub.confirmed else "pending confirmation"
            checks.append(
                Check(
                    BUDGET_ALERTS, Status.NOTE, f"topic {arn}", f"also subscribed: {sub.protocol} ({state})"
                )
            )
    if isinstance(facts.budgets, Unread):
        checks.append(Check(BUDGET_ALERTS, Status.UNKNOWN, "budgets", facts.budgets.why))
        return checks
    notifying = [b for b in facts.budgets if any(arn in subscribers for _, subscribers in b.alerts)]
    fix = (
        f"Add {arn} as an SNS subscriber of the budget's alerts (Billing console, Budgets, the budget's alert "
        "thresholds), or let the stack create one (its MonthlyGpuBudgetUsd parameter)."
    )
    if not facts.budgets:
        checks.append(
            Check(BUDGET_ALERTS, Status.FIX, "budgets", f"the account {facts.account} has no budget", fix)
        )
    elif not notifying:
        checks.append(
            Check(
                BUDGET_ALERTS,
                Status.FIX,
                "budgets",
                f"none of the account's {len(facts.budgets)} budgets notifies the topic: no breach reaches costguard",
                fix,
            )
        )
    for budget in facts.budgets:
        alerts = [what for what, subscribers in budget.alerts if arn in subscribers]
        if alerts:
            checks.append(
                Check(
                    BUDGET_ALERTS,
                    Status.OK,
                    f"budget {budget.name}",
                    f"notifies the topic ({', '.join(alerts)})",
                )
            )
        else:
            has = f"{len(budget.alerts)} alert(s), none to the topic" if budget.alerts else "no alert"
            checks.append(
                Check(BUDGET_ALERTS, Status.NOTE, f"budget {budget.name}", f"does not notify it ({has})")
            )
    return checks


def slack_checks(facts: AccountFacts) -> list[Check]:
    subject = "the Slack secret"
    if isinstance(facts.secret, Unread):
        return [Check(SLACK, Status.UNKNOWN, subject, facts.secret.why)]
    if facts.secret.form is SecretForm.FILLED:
        return [Check(SLACK, Status.OK, subject, facts.secret.says)]
    fix = (
        "Put the webhook URL (or the routing map) in it: aws secretsmanager put-secret-value --secret-id "
        f"{facts.outputs.get('SlackWebhookSecretArn', '<SlackWebhookSecretArn>')} --secret-string <url>"
    )
    return [Check(SLACK, Status.FIX, subject, facts.secret.says, fix)]


def alarm_checks(facts: AccountFacts) -> list[Check]:
    subject = "GpuAlarms"
    if facts.alarms is None:
        return [
            Check(
                GPU_ALARMS, Status.OK, subject, "off: no Metrics Insights alarm is made (the 5-minute sweep)"
            )
        ]
    if isinstance(facts.alarms, Unread):
        return [Check(GPU_ALARMS, Status.UNKNOWN, subject, facts.alarms.why)]
    read = facts.alarms
    if isinstance(read.quota, quotas.Quota):
        quota, source = read.quota.value, read.quota.source
    else:
        why = read.quota.why if isinstance(read.quota, Unread) else "Service Quotas does not list it"
        quota, source = quotas.DOCUMENTED_DEFAULT, f"CloudWatch's documented default ({why})"
    instances = facts.instances if isinstance(facts.instances, list) else []
    needed = sum(1 for i in instances if i.accelerators and i.accelerators.is_nvidia)
    free = quota - (read.insights_alarms - read.costguard_alarms)
    says = (
        f"on: {needed} running NVIDIA GPU instance(s) need as many Metrics Insights alarms; the region has "
        f"{read.insights_alarms} ({read.costguard_alarms} of them costguard's) against a quota of {quota} "
        f"({source})"
    )
    if needed > free:
        return [
            Check(
                GPU_ALARMS,
                Status.FIX,
                subject,
                f"{says}: {needed - free} instance(s) will have no alarm (the 5-minute sweep still judges them)",
                "Set GpuAlarms=off (the sweep alone finds an idle GPU as soon), or delete other Metrics Insights "
                "alarms.",
            )
        ]
    return [Check(GPU_ALARMS, Status.OK, subject, says)]


def sweep_lines(sweep: SweepFacts | Unread) -> list[SweepLine] | str:
    if isinstance(sweep, Unread):
        return sweep.why
    lines = []
    for decision in sweep.decisions:
        action = decision.action.value
        if decision.dry_run and decision.action in (Action.MARK, Action.STOP, Action.UNMARK):
            why = decision.held or "notify mode"  # held: ReasonModes or RemediateScope, where others act
            action = f"would {action} ({why}: reported, not done)"
        summary = decision.finding.summary.splitlines()[0] if decision.finding.summary else ""
        lines.append(SweepLine(decision.reason.value, _resource(decision.resource), action, summary))
    return lines


def _resource(resource: Resource) -> str:
    name = f" {resource.name}" if resource.name and resource.name != resource.id else ""
    return f"{resource.kind.value} {resource.id}{name}"


def render(report: DoctorReport) -> str:
    """The report as `costguard doctor` prints it. Every value read from the account (a Name tag in a subject,
    an AWS error in a sentence) is shown printable: a control character cannot recolour or overwrite a line."""
    p = printable
    out = [
        f"costguard doctor: account {p(report.account)}, {p(report.region)}, stack {p(report.stack)} "
        f"({p(report.mode)} mode), at {report.now:%Y-%m-%d %H:%M} UTC"
    ]
    areas = list(dict.fromkeys(c.area for c in report.checks))
    for area in areas:
        out.append(f"\n{area}")
        for check in (c for c in report.checks if c.area == area):
            out.append(f"  {check.status.value.upper():<8} {p(check.subject)}: {p(check.says)}")
            if check.fix:
                out.append(f"           fix: {p(check.fix)}")
    out.append(f"\nWhat a first sweep would find ({p(_mode_words(report.mode, report.acting))})")
    if isinstance(report.sweep, str):
        out.append(f"  UNKNOWN  {p(report.sweep)}")
    elif not report.sweep:
        out.append("  nothing: no idle, starved or silent GPU resource")
    for line in report.sweep if isinstance(report.sweep, list) else []:
        out.append(f"  {line.reason:<20} {p(line.resource)}: {p(line.action)}")
        out.append(f"  {'':<20} {p(line.summary)}")
    fix, unknown = len(report.to_fix), len(report.unknown)
    verdict = "everything costguard needs is in place" if not (fix or unknown) else ""
    parts = [f"{fix} to fix" if fix else "", f"{unknown} not checked" if unknown else ""]
    out.append("\nSummary: " + (verdict or ", ".join(p for p in parts if p)) + ".")
    return "\n".join(out)


def _mode_words(mode: str, acting: list[str] | None = None) -> str:
    if mode == "remediate":
        return "remediate mode: it marks, then stops after the grace period"
    if acting:
        return f"notify mode, but ReasonModes puts {', '.join(acting)} in remediate: those mark, then stop"
    return "notify mode: it reports and never stops anything"


# -- the reads --------------------------------------------------------------------------------------


def attempt(what: str, read: Callable[[], T]) -> T | Unread:
    """``read()``, or why it failed in a sentence; missing or refused credentials end the run (raised)."""
    try:
        return read()
    except NotThere as error:
        return Unread(str(error))
    except Exception as error:
        if ends_the_run(error):
            raise
        return Unread(f"{what} could not be read: {explain(error) or f'{type(error).__name__}: {error}'}")


def caller_account(region: str) -> str:
    sts: Any = clients.client("sts", region)
    account: str = sts.get_caller_identity()["Account"]
    return account


def read_stack(region: str, name: str) -> StackFacts:
    cloudformation: Any = clients.client("cloudformation", region)
    try:
        stacks = cloudformation.describe_stacks(StackName=name)["Stacks"]
    except cloudformation.exceptions.ClientError as error:
        if "does not exist" in str(error):
            raise NotThere(
                f"no stack {name} in {region}: give --stack with the name you deployed (samconfig.toml's "
                "stack_name), or deploy it (`sam deploy`)"
            ) from None
        raise
    stack = stacks[0]
    return StackFacts(
        name=name,
        parameters={p["ParameterKey"]: p.get("ParameterValue", "") for p in stack.get("Parameters", [])},
        outputs={o["OutputKey"]: o.get("OutputValue", "") for o in stack.get("Outputs", [])},
    )


def deployed_settings(parameters: dict[str, str]) -> Settings:
    """The settings the stack's functions run with: the template's Globals, each ``COSTGUARD_*: !Ref Param``
    taking the stack's value of its parameter, over this environment's COSTGUARD_* variables and the
    defaults."""
    from costguard.local.stack import DEFAULT_TEMPLATE
    from costguard.local.template import Template

    overrides: dict[str, object] = {}
    for name, value in Template.load(DEFAULT_TEMPLATE).global_environment().items():
        ref = value.get("Ref") if isinstance(value, dict) else None
        if name.startswith("COSTGUARD_") and isinstance(ref, str) and ref in parameters:
            overrides[name.removeprefix("COSTGUARD_").lower()] = parameters[ref]
    known = {k: v for k, v in overrides.items() if k in Settings.model_fields}
    return parse_settings(**known)


def gpu_series(region: str) -> list[Dimensions]:
    """Every CloudWatch agent GPU series published in the last three hours (one ListMetrics walk)."""
    cloudwatch: Any = clients.cloudwatch(region)
    found: list[Dimensions] = []
    pages = cloudwatch.get_paginator("list_metrics").paginate(
        Namespace=GPU_NAMESPACE, MetricName=GPU_METRIC, RecentlyActive=RECENT
    )
    for page in pages:
        for metric in page["Metrics"]:
            dims = tuple(sorted((d["Name"], d["Value"]) for d in metric.get("Dimensions", [])))
            if dims not in found:
                found.append(dims)
    return found


def training_hosts(region: str) -> set[str]:
    """The training-job hosts (``<job>/algo-N``) publishing GPUUtilization in the last three hours."""
    cloudwatch: Any = clients.cloudwatch(region)
    pages = cloudwatch.get_paginator("list_metrics").paginate(
        Namespace=TRAINING_NAMESPACE, MetricName=TRAINING_GPU_METRIC, RecentlyActive=RECENT
    )
    return {
        d["Value"]
        for page in pages
        for m in page["Metrics"]
        for d in m.get("Dimensions", [])
        if d["Name"] == "Host"
    }


def read_topic(region: str, arn: str) -> TopicFacts:
    sns: Any = clients.client("sns", region)
    found = []
    try:
        pages = list(sns.get_paginator("list_subscriptions_by_topic").paginate(TopicArn=arn))
    except sns.exceptions.NotFoundException:
        raise NotThere(
            "no such topic: the stack creates it; deploy it, or give --stack with the name it was deployed as"
        ) from None
    for page in pages:
        for sub in page.get("Subscriptions", []):
            arn_of = str(sub.get("SubscriptionArn", ""))
            confirmed = arn_of.startswith("arn:")  # "PendingConfirmation" until confirmed
            found.append(Subscription(str(sub.get("Protocol", "")), str(sub.get("Endpoint", "")), confirmed))
    return TopicFacts(arn, tuple(found))


def _alert_words(notification: dict[str, Any]) -> str:
    comparison = {"GREATER_THAN": ">", "LESS_THAN": "<", "EQUAL_TO": "="}.get(
        str(notification.get("ComparisonOperator", "")), "?"
    )
    unit = "%" if notification.get("ThresholdType", "PERCENTAGE") == "PERCENTAGE" else " USD"
    return f"{notification.get('NotificationType', '?')} {comparison} {notification.get('Threshold', '?'):g}{unit}"


def read_budgets(account: str) -> list[BudgetAlerts]:
    """Every budget of the account with its alerts and their SNS subscribers (the Budgets API is global, in
    us-east-1): DescribeBudgets, then per budget DescribeNotificationsForBudget and per alert
    DescribeSubscribersForNotification."""
    budgets: Any = clients.client("budgets", "us-east-1")
    found = []
    for page in budgets.get_paginator("describe_budgets").paginate(AccountId=account):
        for budget in page.get("Budgets", []):
            name = budget["BudgetName"]
            alerts = []
            notes = budgets.get_paginator("describe_notifications_for_budget")
            for notes_page in notes.paginate(AccountId=account, BudgetName=name):
                for notification in notes_page.get("Notifications", []):
                    subscribers = budgets.get_paginator("describe_subscribers_for_notification")
                    addresses = tuple(
                        str(s.get("Address", ""))
                        for sub_page in subscribers.paginate(
                            AccountId=account, BudgetName=name, Notification=notification
                        )
                        for s in sub_page.get("Subscribers", [])
                        if s.get("SubscriptionType") == "SNS"
                    )
                    alerts.append((_alert_words(notification), addresses))
            found.append(BudgetAlerts(name, tuple(alerts)))
    return found


def secret_state(text: str, extra_hosts: Sequence[str] = ()) -> SecretState:
    """What the secret's text is, in words that never quote it (parse_routes, as the notifier reads it)."""
    if not text.strip():
        return SecretState(SecretForm.UNFILLED, "it is empty: nothing can be told in Slack")
    try:
        routes = parse_routes(text, extra_hosts)
    except SecretFormatError as error:
        return SecretState(SecretForm.MALFORMED, str(error))
    routed = f" and {len(routes.routes)} route(s) by tag value" if routes.routes else ""
    if routes.is_app:
        return SecretState(SecretForm.FILLED, f"a Slack app: a bot token, a default channel{routed}")
    return SecretState(SecretForm.FILLED, f"a webhook: a default channel{routed}")


def read_secret(secret_id: str, region: str, extra_hosts: Sequence[str] = ()) -> SecretState:
    """GetSecretValue of the Slack secret, judged at once; its text goes no further than this function."""
    parts = secret_id.split(":")
    where = parts[3] if secret_id.startswith("arn:") and len(parts) > 3 and parts[3] else region
    secrets: Any = clients.client("secretsmanager", where)
    try:
        answer = secrets.get_secret_value(SecretId=secret_id)
    except secrets.exceptions.ResourceNotFoundException as error:
        if "staging label" in str(error):  # the secret exists, with no value yet
            return SecretState(SecretForm.UNFILLED, "it has no value yet: nothing can be told in Slack")
        raise
    raw = answer.get("SecretString")
    if raw is None:
        try:
            raw = bytes(answer.get("SecretBinary") or b"").decode()
        except UnicodeDecodeError:
            return SecretState(SecretForm.MALFORMED, "it is not UTF-8 text")
    return secret_state(raw, extra_hosts)


def read_alarms(region: str) -> AlarmFacts:
    """The region's Metrics Insights alarms (a query among their metrics), costguard's counted apart, and the
    quota on them."""
    cloudwatch: Any = clients.cloudwatch(region)
    insights = ours = 0
    for page in cloudwatch.get_paginator("describe_alarms").paginate(AlarmTypes=["MetricAlarm"]):
        for alarm in page.get("MetricAlarms", []):
            queries = [m.get("Expression", "") for m in alarm.get("Metrics", [])]
            if any("SELECT" in q.upper() for q in queries):
                insights += 1
                ours += str(alarm.get("AlarmName", "")).startswith(ALARM_PREFIX)
    quota = attempt("the Metrics Insights alarm quota", lambda: quotas.metrics_insights_alarm_quota(region))
    return AlarmFacts(quota, insights, ours)


# -- the first sweep, on what was read --------------------------------------------------------------


class HeldInventory:
    """The instances the doctor read, answered again to the sweep (no second DescribeInstances)."""

    def __init__(self, instances: Sequence[Ec2Instance]) -> None:
        self.instances = list(instances)

    def describe_gpu_instances(
        self, region: str, *, instance_ids: Sequence[str] | None = None
    ) -> list[Ec2Instance]:
        return [i for i in self.instances if not instance_ids or i.id in instance_ids]

    def describe_instance(self, region: str, instance_id: str) -> Ec2Instance | None:
        return next((i for i in self.instances if i.id == instance_id), None)


class ListedMetrics:
    """The GPU series the doctor listed, answered again to the sweep; the datapoints are read from CloudWatch."""

    def __init__(self, series: Sequence[Dimensions]) -> None:
        self.series = list(series)

    def list_gpu_series(
        self, region: str, instance_ids: Sequence[str], dimension: str = "InstanceId"
    ) -> dict[str, list[Dimensions]]:
        wanted = set(instance_ids)
        found: dict[str, list[Dimensions]] = {}
        for dims in self.series:
            owner = dict(dims).get(dimension)
            if owner in wanted:
                found.setdefault(owner, []).append(dims)
        return found

    def get_metric_data(
        self,
        region: str,
        queries: Sequence[cloudwatch_metrics.Query],
        start: datetime,
        end: datetime,
        period: int,
    ) -> cloudwatch_metrics.MetricSet:
        return cloudwatch_metrics.get_metric_data(region, queries, start, end, period)


class HeldSageMaker:
    def __init__(
        self,
        jobs: Sequence[TrainingJob],
        notebooks: Sequence[NotebookInstance],
        endpoints: Sequence[Endpoint],
    ) -> None:
        self.jobs, self.notebooks, self.endpoints = list(jobs), list(notebooks), list(endpoints)

    def in_progress_training_jobs(self, region: str) -> list[TrainingJob]:
        return list(self.jobs)

    def in_service_notebooks(self, region: str) -> list[NotebookInstance]:
        return list(self.notebooks)

    def in_service_endpoints(self, region: str) -> list[Endpoint]:
        return list(self.endpoints)

    def inference_components(self, region: str) -> dict[str, tuple[str, ...]]:
        """The doctor does not list inference components (its policy has no ListInferenceComponents)."""
        return {e.name: e.inference_components for e in self.endpoints}

    def instance_accelerators(
        self, region: str, instance_types: Sequence[str]
    ) -> dict[str, Accelerators | None]:
        """Read from AWS, as the sweep reads them (DescribeInstanceTypes, cached per process)."""
        from costguard.aws.inventory import catalog

        return catalog.lookup(region, instance_types)


class NoActions:
    """The sweep's remediator: the doctor decides, and never acts."""

    def stop(self, resource: Resource) -> None:
        raise RuntimeError("costguard doctor never acts")

    def mark(self, resource: Resource, at: datetime, reason: str | None = None) -> None:
        raise RuntimeError("costguard doctor never acts")

    def unmark(self, resource: Resource) -> None:
        raise RuntimeError("costguard doctor never acts")


def first_sweep(
    region: str,
    now: datetime,
    settings: Settings,
    instances: Sequence[Ec2Instance],
    series: Sequence[Dimensions],
    jobs: Sequence[TrainingJob],
    notebooks: Sequence[NotebookInstance],
    endpoints: Sequence[Endpoint],
) -> SweepFacts:
    """The GPU and SageMaker sweeps' findings on what was read (their datapoints read now), and what the stack's
    mode decides of them. Nothing is written: no marks, no state table, no queue."""
    from costguard.flows import gpu
    from costguard.flows import sagemaker as sagemaker_flow
    from costguard.notify.dedupe import MemoryRepeatGate
    from costguard.notify.queue import MemoryNoticeQueue
    from costguard.policy import decide_all
    from costguard.pricing import price_book
    from costguard.reads import Reads
    from costguard.runtime import Runtime

    runtime = Runtime(
        settings=settings,
        remediator=NoActions(),
        queue=MemoryNoticeQueue(),
        gate=MemoryRepeatGate(),
        prices=price_book(live=settings.price_source == "live"),
        reads=Reads(
            inventory=HeldInventory(instances),
            metrics=ListedMetrics(series),
            sagemaker=HeldSageMaker(jobs, notebooks, endpoints),
        ),
    )
    thresholds = thresholds_from(settings)
    nvidia = [i for i in instances if i.accelerators and i.accelerators.is_nvidia]
    findings: list[Finding] = []
    if nvidia:
        listed = runtime.reads.metrics.list_gpu_series(region, [i.id for i in nvidia])
        for chunk in gpu.chunks(nvidia, listed):
            findings += gpu.judge_chunk(region, chunk, listed, runtime, thresholds, now, None, None)
    findings += sagemaker_flow.findings_for(region, runtime, thresholds, now, None)
    decisions = decide_all(findings, runtime.policy, now)
    return SweepFacts(settings.mode.value, tuple(findings), tuple(decisions))


def read_account(region: str, stack_name: str, now: datetime) -> AccountFacts:
    """Everything the checks need, read from the account; each read that fails is kept as why."""
    account = caller_account(region)
    stack = attempt(f"the stack {stack_name}", lambda: read_stack(region, stack_name))
    parameters = stack.parameters if isinstance(stack, StackFacts) else {}
    outputs = stack.outputs if isinstance(stack, StackFacts) else {}
    settings = sweep_settings(parameters)
    instances = attempt("the GPU instances", lambda: inventory.describe_gpu_instances(region))
    notebooks = attempt("the notebook instances", lambda: gpu_notebooks(region))
    jobs = attempt("the training jobs", lambda: gpu_training_jobs(region))
    endpoints = attempt("the endpoints", lambda: sagemaker_reads.in_service_endpoints(region))
    series = attempt("the CloudWatch agent's GPU series (ListMetrics)", lambda: gpu_series(region))
    arn = outputs.get("CostAlertsTopicArn") or topic_arn(region, account, stack_name)
    sweep = (
        settings
        if isinstance(settings, Unread)
        else attempt(
            "the first sweep",
            lambda: first_sweep(
                region,
                now,
                settings,
                _listed(instances),
                _listed(series),
                _listed(jobs),
                _listed(notebooks),
                _listed(endpoints),
            ),
        )
    )
    return AccountFacts(
        account=account,
        region=region,
        now=now,
        stack_name=stack_name,
        stack=stack,
        instances=instances,
        notebooks=notebooks,
        jobs=jobs,
        gpu_series=series,
        job_hosts=attempt("the training jobs' GPU series (ListMetrics)", lambda: training_hosts(region)),
        topic=attempt("it", lambda: read_topic(region, arn)),
        budgets=attempt("the budgets (AWS Budgets)", lambda: read_budgets(account)),
        secret=secret_of(stack, region),
        alarms=alarms_of(stack, region),
        sweep=sweep,
    )


def sweep_settings(parameters: dict[str, str]) -> Settings | Unread:
    """The deployed settings for the first sweep; with a ReasonModes or RemediateScope that does not read (a
    Remediation check to fix), why the sweep is not run: the stack's functions would not start. Any other bad
    parameter raises SettingsError."""
    try:
        return deployed_settings(parameters)
    except SettingsError as error:
        if not any(f"COSTGUARD_{name}" in str(error) for name in ("REASON_MODES", "REMEDIATE_SCOPE")):
            raise
        return Unread(
            f"not run: the stack's functions refuse to start with its settings (see Remediation): {error}"
        )


def gpu_notebooks(region: str) -> list[NotebookInstance]:
    return [
        n for n in sagemaker_reads.in_service_notebooks(region) if n.accelerators and n.accelerators.is_nvidia
    ]


def gpu_training_jobs(region: str) -> list[TrainingJob]:
    jobs = sagemaker_reads.in_progress_training_jobs(region)
    return [j for j in jobs if j.accelerators and j.accelerators.is_nvidia]


def secret_of(stack: StackFacts | Unread, region: str) -> SecretState | Unread:
    """The Slack secret the stack's SlackWebhookSecretArn output names, judged."""
    if isinstance(stack, Unread):
        return Unread(f"the stack's SlackWebhookSecretArn output names it: {stack.why}")
    secret_arn = stack.outputs.get("SlackWebhookSecretArn")
    if not secret_arn:
        return Unread(f"the stack {stack.name} has no SlackWebhookSecretArn output")
    hosts = [h for h in stack.parameters.get("SlackWebhookHosts", "").split(",") if h.strip()]
    return attempt("the Slack secret", lambda: read_secret(secret_arn, region, hosts))


def alarms_of(stack: StackFacts | Unread, region: str) -> AlarmFacts | Unread | None:
    """With the stack's GpuAlarms=on, the region's Metrics Insights alarms and their quota; None when off."""
    if isinstance(stack, Unread):
        return Unread(f"the stack's GpuAlarms parameter says whether alarms are made: {stack.why}")
    alarms_on = stack.parameters.get("GpuAlarms")
    if alarms_on is None:
        return Unread(f"the stack {stack.name} has no GpuAlarms parameter")
    if alarms_on != "on":
        return None
    return attempt("the Metrics Insights alarms (DescribeAlarms)", lambda: read_alarms(region))


def _listed(read: list[T] | Unread) -> list[T]:
    return read if isinstance(read, list) else []


def doctor(region: str, stack_name: str, now: datetime) -> DoctorReport:
    """Read the account, then build the report; the API calls made are counted in it."""
    clients.calls.clear()
    facts = read_account(region, stack_name, now)
    facts.api_calls = {
        f"{service}:{operation}": n for (service, operation), n in sorted(clients.calls.items())
    }
    return build_report(facts)


def policy_text(policy: dict[str, Any]) -> str:
    return json.dumps(policy, indent=2)
