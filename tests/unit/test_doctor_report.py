"""`costguard doctor`'s report from what it read (pure: no AWS), and its Slack secret judgement, which never
quotes the secret."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from costguard.aws.quotas import Quota
from costguard.model import Accelerators, Ec2Instance, NotebookInstance, TrainingJob
from costguard.ops.doctor import (
    AccountFacts,
    AlarmFacts,
    BudgetAlerts,
    SecretForm,
    StackFacts,
    Status,
    Subscription,
    SweepFacts,
    TopicFacts,
    Unread,
    build_report,
    render,
    secret_state,
)

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
ACCOUNT = "123456789012"
TOPIC = f"arn:aws:sns:us-east-1:{ACCOUNT}:costguard-cost-alerts"
A10G = Accelerators(kind="nvidia_gpu", count=4, model="A10G")
INFERENTIA = Accelerators(kind="inferentia", count=1, model="Inferentia2")
WEBHOOK = "https://hooks.slack.com/services/T000/B000/SECRETPATH"


def instance(n: int, accelerators: Accelerators = A10G, tags: dict[str, str] | None = None) -> Ec2Instance:
    return Ec2Instance(
        f"i-{n:017x}", "g5.12xlarge", "running", ACCOUNT, "us-east-1", NOW, tags or {}, None, accelerators
    )


def series(owner: str, *indices: int, dimension: str = "InstanceId") -> list[tuple[tuple[str, str], ...]]:
    return [tuple(sorted({dimension: owner, "index": str(i), "name": "A10G"}.items())) for i in indices]


def facts(**changes: object) -> AccountFacts:
    base = AccountFacts(
        account=ACCOUNT,
        region="us-east-1",
        now=NOW,
        stack_name="costguard",
        stack=StackFacts(
            "costguard",
            {"Mode": "notify", "GpuAlarms": "off", "ReasonModes": "", "RemediateScope": ""},
            {"CostAlertsTopicArn": TOPIC, "BudgetsFunctionName": "costguard-Budgets-1"},
        ),
        instances=[],
        notebooks=[],
        jobs=[],
        gpu_series=[],
        job_hosts=set(),
        topic=TopicFacts(
            TOPIC,
            (
                Subscription(
                    "lambda", f"arn:aws:lambda:us-east-1:{ACCOUNT}:function:costguard-Budgets-1", True
                ),
            ),
        ),
        budgets=[BudgetAlerts("gpu", (("ACTUAL > 100%", (TOPIC,)),))],
        secret=secret_state(WEBHOOK),
        alarms=None,
        sweep=SweepFacts("notify", (), ()),
    )
    return replace(base, **changes)  # type: ignore[arg-type]


def only(report_facts: AccountFacts, area: str) -> list[tuple[Status, str]]:
    return [(c.status, c.subject) for c in build_report(report_facts).checks if c.area == area]


def test_an_account_with_everything_in_place_passes() -> None:
    report = build_report(
        facts(instances=[instance(1)], gpu_series=series("i-00000000000000001", 0, 1, 2, 3))
    )
    assert [c.status for c in report.checks] == [Status.OK] * 8
    assert report.exit_code == 0
    assert "Summary: everything costguard needs is in place." in render(report)


def test_an_instance_without_the_agent_is_to_fix_with_the_agent_configuration() -> None:
    silent, partial, neuron = instance(1), instance(2), instance(3, INFERENTIA)
    report = build_report(
        facts(
            instances=[silent, partial, neuron],
            gpu_series=[
                *series(partial.id, 0, 1),
                (("host", "ip-10-0-0-7"), ("index", "0"), ("name", "A10G")),
            ],
        )
    )
    checks = {c.subject.split()[1]: c for c in report.checks if c.area == "GPU metrics"}
    missing = checks[silent.id]
    assert missing.status is Status.FIX
    assert (
        "publishes no nvidia_smi_utilization_gpu series with an InstanceId dimension (4 GPUs)" in missing.says
    )
    assert "ip-10-0-0-7" in missing.says and "lacks append_dimensions InstanceId" in missing.says
    assert missing.fix is not None and '"nvidia_gpu"' in missing.fix and '"append_dimensions"' in missing.fix
    assert checks[partial.id].status is Status.FIX
    assert (
        "2 of its 4 GPUs publish" in checks[partial.id].says and "GPU 2, 3 do not" in checks[partial.id].says
    )
    assert checks[neuron.id].status is Status.NOTE and "not NVIDIA" in checks[neuron.id].says
    assert report.exit_code == 1
    text = render(report)
    assert f"FIX      instance {silent.id} (g5.12xlarge): publishes no" in text
    assert "fix: Install the CloudWatch agent" in text


def test_the_stacks_agent_tag_is_the_first_fix_offered() -> None:
    tagged = instance(1, tags={"costguard:agent": "yes"})
    untagged = instance(2)
    stack = StackFacts("costguard", {"GpuAlarms": "off", "GpuAgentTagKey": "costguard:agent"}, {})
    report = build_report(facts(stack=stack, instances=[tagged, untagged]))
    fixes = {c.subject.split()[1]: c.fix or "" for c in report.checks if c.status is Status.FIX}
    assert fixes[untagged.id].startswith("Tag it costguard:agent")
    assert "State Manager association should install the agent" in fixes[tagged.id]


def test_notebooks_and_training_jobs() -> None:
    notebook = NotebookInstance("lab", "arn:nb", ACCOUNT, "us-east-1", "ml.g5.xlarge", "InService", {}, A10G)
    running = TrainingJob("old", "arn:j1", ACCOUNT, "us-east-1", "ml.g5.xlarge", 2, NOW - timedelta(hours=2))
    starting = TrainingJob(
        "new", "arn:j2", ACCOUNT, "us-east-1", "ml.g5.xlarge", 1, NOW - timedelta(minutes=5)
    )
    busy = TrainingJob("busy", "arn:j3", ACCOUNT, "us-east-1", "ml.g5.xlarge", 2, NOW - timedelta(hours=2))
    report = build_report(
        facts(notebooks=[notebook], jobs=[running, starting, busy], job_hosts={"busy/algo-1", "busy/algo-2"})
    )
    checks = {c.subject.split(" (")[0]: c for c in report.checks if c.area == "GPU metrics"}
    assert checks["notebook lab"].status is Status.FIX
    assert "NotebookInstanceName" in (checks["notebook lab"].fix or "")
    assert checks["training job old"].status is Status.FIX
    assert (
        checks["training job new"].status is Status.NOTE
        and "5 minutes ago" in checks["training job new"].says
    )
    assert checks["training job busy"].status is Status.OK


def test_budget_alerts_topic_and_budgets() -> None:
    unsubscribed = TopicFacts(TOPIC, (Subscription("email", "ops@example.com", False),))
    report = build_report(facts(topic=unsubscribed, budgets=[BudgetAlerts("other", (("ACTUAL > 80%", ()),))]))
    checks = [(c.status, c.subject, c.says) for c in report.checks if c.area == "Budget alerts"]
    assert checks[0][:2] == (Status.FIX, f"topic {TOPIC}")
    assert "no subscription of the stack's budgets function" in checks[0][2]
    assert checks[1] == (Status.NOTE, f"topic {TOPIC}", "also subscribed: email (pending confirmation)")
    assert checks[2][:2] == (Status.FIX, "budgets") and "none of the account's 1 budgets" in checks[2][2]
    assert checks[3] == (Status.NOTE, "budget other", "does not notify it (1 alert(s), none to the topic)")
    assert only(facts(budgets=[]), "Budget alerts")[1] == (Status.FIX, "budgets")


def test_what_could_not_be_read_is_said_and_fails_the_run() -> None:
    why = "the budgets (AWS Budgets) could not be read: AWS denied DescribeBudgets (AccessDenied): ..."
    report = build_report(facts(budgets=Unread(why), stack=Unread("no stack costguard in us-east-1")))
    unknown = {c.subject: c.says for c in report.unknown}
    assert unknown == {"budgets": why, "costguard": "no stack costguard in us-east-1"}
    assert report.exit_code == 1
    assert "2 not checked" in render(report)


def test_the_alarm_quota_when_gpu_alarms_are_on() -> None:
    fleet = [instance(n) for n in range(1, 6)]
    room = AlarmFacts(Quota(200, "AWS default"), insights_alarms=3, costguard_alarms=3)
    [fits] = build_report(facts(instances=fleet, alarms=room)).checks[-1:]
    assert fits.status is Status.OK and "5 running NVIDIA GPU instance(s)" in fits.says
    full = AlarmFacts(Quota(6, "applied to the account"), insights_alarms=4, costguard_alarms=1)
    [over] = build_report(facts(instances=fleet, alarms=full)).checks[-1:]
    assert over.status is Status.FIX and "2 instance(s) will have no alarm" in over.says
    unread = AlarmFacts(Unread("the quota could not be read: denied"), insights_alarms=0, costguard_alarms=0)
    [default] = build_report(facts(instances=fleet, alarms=unread)).checks[-1:]
    assert (
        "quota of 200 (CloudWatch's documented default (the quota could not be read: denied))" in default.says
    )


@pytest.mark.parametrize(
    ("text", "form", "says"),
    [
        (WEBHOOK, SecretForm.FILLED, "a webhook: a default channel"),
        (
            '{"default": "' + WEBHOOK + '", "routes": {"nlp": "' + WEBHOOK + '"}}',
            SecretForm.FILLED,
            "a webhook: a default channel and 1 route(s) by tag value",
        ),
        (
            '{"bot_token": "xoxb-1-2-SECRETPATH", "signing_secret": "0123456789abcdef0123", "default": "C0123ABCD"}',
            SecretForm.FILLED,
            "a Slack app: a bot token, a default channel",
        ),
        ("   ", SecretForm.UNFILLED, "it is empty"),
        ("http://example.com/SECRETPATH", SecretForm.MALFORMED, "not a usable webhook URL"),
        ('{"default": "SECRETPATH"', SecretForm.MALFORMED, "not a valid routing map"),
    ],
)
def test_the_slack_secret_is_judged_without_being_quoted(text: str, form: SecretForm, says: str) -> None:
    state = secret_state(text)
    assert state.form is form
    assert says in state.says
    assert "SECRETPATH" not in state.says
    check = build_report(facts(secret=state)).checks
    slack = next(c for c in check if c.area == "Slack")
    assert slack.status is (Status.OK if form is SecretForm.FILLED else Status.FIX)
    assert "SECRETPATH" not in render(build_report(facts(secret=state)))


def stack_with(**parameters: str) -> StackFacts:
    return StackFacts("costguard", {"Mode": "notify", "GpuAlarms": "off"} | parameters, {})


def test_reason_modes_and_scope_as_deployed_a_sentence_each() -> None:
    research = instance(1, tags={"team": "research"})
    report = build_report(
        facts(
            stack=stack_with(
                Mode="remediate", ReasonModes="notebook_idle=notify", RemediateScope="team=vision|nlp"
            ),
            instances=[research, instance(2, tags={"team": "vision"}), instance(3)],
        )
    )
    checks = {c.subject: c for c in report.checks if c.area == "Remediation"}
    modes, scope = checks["ReasonModes"], checks["RemediateScope"]
    assert modes.status is scope.status is Status.OK
    assert "gpu_idle stops idle GPU instances" in modes.says
    assert modes.says.endswith("; reported only: notebook_idle")
    assert "notebook_idle" not in (report.acting or []) and "budget_breach" in (report.acting or [])
    assert scope.says == (
        "team=vision|nlp: resources not tagged team=nlp or team=vision (or without a team tag) are out of scope, "
        "reported only and never stopped; of the 3 GPU resources read, 2 are: no team tag (1), team=research (1)"
    )


def test_notify_mode_without_reason_modes_stops_nothing_and_leaves_no_team_out() -> None:
    report = build_report(facts(stack=stack_with(ReasonModes="", RemediateScope="")))
    says = {c.subject: c.says for c in report.checks if c.area == "Remediation"}
    assert (
        says["ReasonModes"]
        == "Mode=notify with no ReasonModes: no reason stops anything, every finding is only reported"
    )
    assert says["RemediateScope"] == "empty: every resource is in scope, no team is left out"
    assert "notify mode: it reports and never stops anything" in render(report)
    assert report.exit_code == 0


def test_reason_modes_or_scope_that_do_not_read_are_to_fix() -> None:
    report = build_report(facts(stack=stack_with(ReasonModes="gpu_idle=stop", RemediateScope="team=")))
    checks = {c.subject: c for c in report.checks if c.area == "Remediation"}
    assert checks["ReasonModes"].status is checks["RemediateScope"].status is Status.FIX
    assert "the mode is notify or remediate, not 'stop'" in checks["ReasonModes"].says
    assert checks["ReasonModes"].fix and "ReasonModes=" in checks["ReasonModes"].fix
    assert checks["RemediateScope"].fix and "RemediateScope=" in checks["RemediateScope"].fix
    assert report.exit_code == 1 and report.acting is None


def test_a_stack_deployed_before_reason_modes_follows_mode() -> None:
    [modes, scope] = [c for c in build_report(facts(stack=stack_with())).checks if c.area == "Remediation"]
    assert (modes.status, scope.status) == (Status.NOTE, Status.NOTE)
    assert modes.says.startswith(
        "the stack has no ReasonModes parameter (deployed before it existed), so: Mode="
    )
