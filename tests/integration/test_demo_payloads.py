"""Every Slack payload of the demo reads as sentences: no Python reprs, no field that does not apply to its
resource's kind, a dollar figure in the notification text, and how to get a stopped resource back."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from costguard.local.demo import DemoRun, run_demo
from costguard.local.render import render
from costguard.local.world import World
from costguard.model import ResourceKind
from costguard.notify.group_message import build_group_message
from costguard.notify.message import build_message, build_reply
from costguard.notify.notice import GroupNotice, Notice

# What Python prints for its own values, and never a person.
REPRS = ["['", "{'", " True", " False", " None", "[]", "{}"]
# Kinds with no instances, tags or protect tag of their own.
NOT_ON_INSTANCES = {"budget", "cost_anomaly", "job_family", "training_digest", "batch_queue"}
PROTECTABLE = {"ec2_instance", "training_job", "notebook_instance", "capacity_reservation"}


def _texts(message: dict[str, Any]) -> Iterator[str]:
    yield message["text"]
    for block in message["blocks"]:
        if "text" in block:
            yield block["text"]["text"]
        yield from (f["text"] for f in block.get("fields", []))
        for element in block.get("elements", []):
            text = element.get("text")
            yield from ([text] if isinstance(text, str) else [text["text"]] if isinstance(text, dict) else [])


@dataclass
class Demo:
    """`costguard demo`'s run, and each payload with the decision(s) the notifier built it from."""

    run: DemoRun
    built: list[tuple[dict[str, Any], dict[str, Any]]]  # (decision, payload) of single messages and replies
    groups: list[tuple[list[dict[str, Any]], dict[str, Any]]]  # (row decisions, payload) of group messages
    grouped: list[tuple[GroupNotice, dict[str, Any]]]  # the same, with the group each was built from

    @property
    def payloads(self) -> list[dict[str, Any]]:
        return [*self.run.posted, *self.run.updates]


@pytest.fixture(scope="module", params=["notify", "remediate"])
def demo_run(request: pytest.FixtureRequest) -> Demo:
    """Every file in events/ through the embedded stack and a local Slack app, as `costguard demo` runs them."""
    from costguard.local.world import load_world
    from costguard.notify import opening, posts
    from tests.conftest import DEMO_WORLD

    built: list[tuple[dict[str, Any], dict[str, Any]]] = []
    groups: list[tuple[list[dict[str, Any]], dict[str, Any]]] = []
    grouped: list[tuple[GroupNotice, dict[str, Any]]] = []

    def recording(builder: Any) -> Any:
        def build(notice: Notice, **options: Any) -> dict[str, Any]:
            payload: dict[str, Any] = builder(notice, **options)
            built.append((notice.decision.summary(), payload))
            return payload

        return build

    def recording_group(group: GroupNotice, **options: Any) -> dict[str, Any]:
        payload = build_group_message(group, **options)
        groups.append(([row.decision.summary() for row in group.rows], payload))
        grouped.append((group, payload))
        return payload

    world: World = load_world(DEMO_WORLD)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(posts, "build_message", recording(build_message))
        patch.setattr(opening, "build_message", recording(build_message))
        patch.setattr(posts, "build_reply", recording(build_reply))
        patch.setattr(posts, "build_group_message", recording_group)
        run = run_demo(world, request.param)
    assert all(r.ok for r in run.results), [r.error for r in run.results if not r.ok]
    # Every payload Slack received is one the notifier built.
    assert len(run.posted) + len(run.updates) == len(built) + len(groups) > 10
    return Demo(run, built, groups, grouped)


@pytest.fixture(scope="module")
def demo(demo_run: Demo) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    return demo_run.built


def test_the_demo_posts_at_most_35_messages_and_every_finding_is_in_one(demo_run: Demo) -> None:
    run = demo_run.run
    # What the channel shows: 44 messages for 37 events before conversations, groups and the batching window.
    # Each budget alert and each anomaly is its own message (a budget's alerts in one thread), and a group is of
    # one resource kind: a kind with one finding in a batch is told on its own. The EKS sweeps add 4: the cluster
    # without an access entry, the unused GPU node, the idle workloads as one group, and the scale to zero. The
    # evaluation job nearing its cost ceiling adds 1. The HyperPod events add 2: the unhealthy node, and the cluster
    # (its failure and its provisioning error in one conversation). The alarm of a terminated instance adds 1; the
    # silent-GPU and busy-again instances and the starved pod join groups at 12:00, but push that batch past the
    # notifier's batch size of 25: its training-job group is told in two invocations, 2 more messages. The
    # HyperPod sweep at 13:00 adds 1: the instance group with idle GPUs (hyperpod_idle). The hung four-node job
    # adds 1: the noon batch's invocations split its training jobs, and it is told on its own (job_hung). The
    # ledger's line for the day, at midnight, adds 1 (ledger_daily).
    assert len(run.channel_messages) <= 35, [m["text"] for m in run.channel_messages]
    said = render_all(demo_run.payloads)
    missing = [
        (f["reason"], f["resource_id"])
        for r in run.results
        for f in r.findings
        if f["resource_id"] not in said and (f.get("resource_name") or "\0") not in said
    ]
    assert missing == [], missing
    assert sum(len(r.findings) for r in run.results) > 50


def test_the_demo_shows_a_thread_kept_running_then_the_snooze_ends(demo_run: Demo) -> None:
    """idle -> marked -> someone keeps it running -> the snooze ends -> stopped (or would be, in notify mode)."""
    run = demo_run.run
    kept = "research-g6e-forgotten"  # i-0a1f00000000000d1, kept for 4 hours at 12:05
    replies = [m for m in run.posted if m.get("thread_ts") and kept in json.dumps(m)]
    texts = [render(m) for m in replies]
    assert any("kept running until 2026-11-20 16:05 UTC" in t and "<@U0LOCALOPS1>" in t for t in texts), texts
    after = [t for t in texts if "16:10" in t]
    assert after, texts
    assert ("Stopped" in after[-1]) or ("Would mark" in after[-1] or "Would stop" in after[-1]), after[-1]
    assert len({m["thread_ts"] for m in replies}) == 1  # one conversation


def render_all(payloads: list[dict[str, Any]]) -> str:
    """What a reader sees (entities unescaped), and the links' targets."""
    return "\n".join(render(p, width=10_000) + json.dumps(p) for p in payloads)


def test_no_payload_shows_a_python_repr(demo_run: Demo) -> None:
    assert demo_run.groups  # group messages are scanned too
    for message in demo_run.payloads:
        for text in _texts(message):
            for repr_ in REPRS:
                assert repr_ not in text, f"{message['text']}: {repr_!r} in {text!r}"


def test_no_field_that_does_not_apply_to_the_kind(demo_run: Demo) -> None:
    kinds = {row["resource_kind"] for rows, _ in demo_run.groups for row in rows}
    for decision, message in demo_run.built:
        kind = decision["resource_kind"]
        kinds.add(kind)
        everything = "\n".join(_texts(message))
        where = f"{decision['reason']} {kind} {decision['resource_id']}"
        if kind in NOT_ON_INSTANCES:
            assert "*Type*" not in everything, where
            assert "Tags:" not in everything, where
            assert "unknown x" not in everything, where
        if kind not in PROTECTABLE or decision["reason"].startswith("capacity_block"):
            assert "To protect it" not in everything, where
        if "protected by tag" in decision["note"]:
            assert "To protect it" not in everything, where
            assert "Protected by its tag" in everything, where
    # The demo covers the kinds the rules are about.
    assert {"budget", "cost_anomaly", "job_family", "training_digest", "batch_queue", "ec2_instance"} <= kinds


def test_the_notification_text_carries_the_dollar_figure(
    demo: list[tuple[dict[str, Any], dict[str, Any]]],
) -> None:
    for decision, message in demo:
        # A budget's or an anomaly's $/h is what runs in its scope, not its own figure: never in its text.
        if decision["hourly_usd"] is not None and ResourceKind(decision["resource_kind"]).has_own_rate:
            assert f"${decision['hourly_usd']:,.2f}/h" in message["text"], message["text"]
        if decision["cost_usd"] is not None:
            assert f"${decision['cost_usd']:,.2f}" in message["text"], message["text"]
        if len(message["blocks"]) < 2:
            continue  # a reply in a thread: its figure is in the first message
        unreadable = "could not read" in message["blocks"][1]["text"]["text"]  # a budget alert with no figure
        if decision["reason"] in ("budget_breach", "cost_anomaly", "training_digest", "job_failure_loop"):
            assert "$" in message["text"] or unreadable, message["text"]


def test_every_group_total_counts_each_resource_once(demo_run: Demo) -> None:
    """A group's $/h is the sum over its distinct resources with a price of their own: a resource with two
    findings once, a budget's, an anomaly's or a family's figure never."""
    assert demo_run.grouped
    for grouped, payload in demo_run.grouped:
        assert grouped.count == len(grouped.rows)  # the demo's groups carry every row: the sum can be redone
        rates: dict[str, float] = {}
        for row in grouped.rows:
            resource, hourly = row.decision.resource, row.decision.hourly_usd
            if resource.kind.has_own_rate and hourly is not None:
                rates[resource.key] = max(hourly, rates.get(resource.key, hourly))
        summary = payload["blocks"][1]["text"]["text"]
        stated = re.search(r"costing \*\$([0-9,.]+)/h\*", summary)
        if not rates:
            assert stated is None, summary
            continue
        assert stated is not None, summary
        assert float(stated.group(1).replace(",", "")) == round(sum(rates.values()), 2), summary
        resources = {r.decision.resource.key for r in grouped.rows if r.decision.resource.kind.has_own_rate}
        assert f" on {len(resources)} " in summary, summary


STANDALONE = {"budget", "cost_anomaly"}


def test_no_budget_alert_or_anomaly_is_a_row_of_a_group(demo_run: Demo) -> None:
    """Each is its own message, with its ranked list and what its level did; a group is of one kind."""
    for rows, payload in demo_run.groups:
        assert not [r for r in rows if r["resource_kind"] in STANDALONE], payload["text"]
        assert len({r["resource_kind"] for r in rows}) == 1, payload["text"]
        said = json.dumps(payload)
        assert "Budget breached" not in said and "Cost anomaly" not in said, said
    alerts = [(d, m) for d, m in demo_run.built if d["resource_kind"] in STANDALONE and len(m["blocks"]) > 2]
    assert {d["resource_kind"] for d, _ in alerts} == STANDALONE
    for decision, message in alerts:
        everything = "\n".join(_texts(message))
        if decision["resource_kind"] == "budget" and "could not read" not in everything:
            assert "costliest first" in everything, everything


# The findings costguard reports and never acts on: no button may offer to stop what they are about.
NEVER_STOPPED = {"training_job_failed", "spot_interruption", "gpu_starved", "checkpoint_stale"}


def _stop_buttons(message: dict[str, Any]) -> list[str]:
    """The reason of each Stop now a message offers (its value: "<reason>|<resource key>")."""
    return [
        element["value"].split("|", 1)[0]
        for block in message["blocks"]
        if block["type"] == "actions"
        for element in block["elements"]
        if element.get("action_id") == "costguard:stop"
    ]


def test_stop_now_is_offered_only_where_it_can_stop(demo_run: Demo) -> None:
    notify = all(r.decisions == [] or all(d["dry_run"] for d in r.decisions) for r in demo_run.run.results)
    offered = [reason for message in demo_run.payloads for reason in _stop_buttons(message)]
    if notify:
        assert offered == []  # notify mode stops nothing: a Stop now there could only say so
    else:
        assert offered  # remediate mode offers it on what costguard marked
    assert not NEVER_STOPPED & set(offered), offered
    told = {d["reason"] for d, _ in demo_run.built} | {
        r["reason"] for rows, _ in demo_run.groups for r in rows
    }
    assert told & NEVER_STOPPED == NEVER_STOPPED  # the demo tells each of them


def test_a_stop_says_how_to_get_the_resource_back(demo: list[tuple[dict[str, Any], dict[str, Any]]]) -> None:
    stops = [(d, m) for d, m in demo if d["action"] == "stop"]
    assert stops
    for decision, message in stops:
        everything = "\n".join(_texts(message))
        if decision["dry_run"]:  # notify mode: nothing was stopped, so nothing to start again
            assert "To start it again" not in everything and "cannot be started again" not in everything
            continue
        if decision["resource_kind"] == "ec2_instance":
            assert f"aws ec2 start-instances --instance-ids {decision['resource_id']}" in everything
        elif decision["resource_kind"] == "notebook_instance":
            assert "StartNotebookInstance" in everything
        elif decision["resource_kind"] == "training_job":
            assert "cannot be started again: re-run it" in everything


def test_the_terminal_view_shows_what_slack_shows(demo_run: Demo) -> None:
    shown = "\n".join(render(message) for message in demo_run.payloads)
    for entity in ("&gt;", "&lt;", "&amp;"):
        assert entity not in shown
    assert "actual>=100:stop_idle" in shown  # the budget's escalation level, as Slack shows it


def test_evidence_is_rendered_by_value_type() -> None:
    from datetime import UTC, datetime

    from costguard.act.executor import Outcome
    from costguard.model import Action, Decision, Finding, Reason, Resource, ResourceKind
    from costguard.notify.message import build_message
    from costguard.notify.notice import Notice

    now = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
    resource = Resource(kind=ResourceKind.TRAINING_DIGEST, id="d", account="123456789012", region="us-east-1")
    evidence = {
        "flags": [True, False, None],
        "nested": {"managed_spot": False, "limit_hours": 72.0, "owner": None},
        "ranked": [{"kind": "ec2_instance", "id": "i-1", "hourly_usd": 2.5, "verdict": "no_metrics"}],
        "price_usd_per_hour": 3.825,
        "runtime_seconds": 14580,
        "share_percent": 12.5,
        "started": "2026-11-20T07:15:00+00:00",
        "long": [f"item {i}" for i in range(30)],
    }
    finding = Finding(
        reason=Reason.TRAINING_DIGEST, resource=resource, summary="s", observed_at=now, evidence=evidence
    )
    decision = Decision(
        action=Action.NOTIFY, reason=finding.reason, finding=finding, dry_run=True, decided_at=now
    )
    message = build_message(Notice(decision=decision, outcome=Outcome(done=False, detail="none")))
    [evidence_text] = [t for t in _texts(message) if t.startswith("*Evidence*")]
    assert "◦ yes\n    ◦ no\n    ◦ unknown" in evidence_text
    assert "◦ Managed spot: no" in evidence_text and "◦ Limit hours: 72" in evidence_text
    assert "◦ Owner: unknown" in evidence_text
    assert "◦ i-1 (ec2 instance): $2.50/h, no metrics" in evidence_text
    assert "• Price per instance-hour: $3.83" in evidence_text
    assert "• Runtime: 4h 03m" in evidence_text
    assert "• Share: 12.5%" in evidence_text
    assert "• Started: 2026-11-20 07:15 UTC" in evidence_text
    assert "◦ item 19\n    ◦ … and 10 more" in evidence_text
    assert not any(r in json.dumps(message) for r in ("['", "{'", "True", "False", "None"))


def test_the_terminal_view_unescapes_and_keeps_links() -> None:
    message = {
        "blocks": [
            {"type": "section", "text": {"type": "mrkdwn", "text": "a &lt;!channel&gt; &amp;lt; b"}},
            {
                "type": "context",
                "elements": [{"type": "mrkdwn", "text": "<https://x.amazon.com/a|name &amp; co>"}],
            },
        ]
    }
    shown = render(message)
    assert "a <!channel> &lt; b" in shown
    assert "name & co (https://x.amazon.com/a)" in shown


@pytest.mark.parametrize("kind", ["budget", "cost_anomaly", "job_family", "training_digest", "batch_queue"])
def test_kinds_without_instances_get_no_type_tags_or_protect_hint(kind: str) -> None:
    from datetime import UTC, datetime

    from costguard.act.executor import Outcome
    from costguard.model import Action, Decision, Finding, Reason, Resource, ResourceKind
    from costguard.notify.message import build_message
    from costguard.notify.notice import Notice

    now = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
    resource = Resource(
        kind=ResourceKind(kind), id="x", account="123456789012", region="us-east-1", tags={"team": "a"}
    )
    finding = Finding(reason=Reason.BUDGET_BREACH, resource=resource, summary="s", observed_at=now)
    decision = Decision(
        action=Action.NOTIFY, reason=finding.reason, finding=finding, dry_run=True, decided_at=now
    )
    everything = "\n".join(
        _texts(build_message(Notice(decision=decision, outcome=Outcome(done=False, detail=""))))
    )
    assert "*Type*" not in everything and "Tags:" not in everything and "protect" not in everything
    assert "*Cost per hour*" not in everything  # unknown, and not a thing a budget has


def test_a_protected_resource_is_not_told_to_protect_itself() -> None:
    from datetime import UTC, datetime

    from costguard.act.executor import Outcome
    from costguard.model import Action, Decision, Finding, Reason, Resource, ResourceKind
    from costguard.notify.message import build_message
    from costguard.notify.notice import Notice

    now = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
    resource = Resource(
        kind=ResourceKind.EC2_INSTANCE,
        id="i-1",
        account="123456789012",
        region="us-east-1",
        instance_type="p4d.24xlarge",
        tags={"costguard:protect": "true"},
    )
    finding = Finding(
        reason=Reason.GPU_IDLE, resource=resource, summary="s", observed_at=now, hourly_usd=21.96
    )
    decision = Decision(
        action=Action.NOTIFY, reason=finding.reason, finding=finding, dry_run=True, decided_at=now
    )
    message = build_message(Notice(decision=decision, outcome=Outcome(done=False, detail="")))
    everything = "\n".join(_texts(message))
    assert "To protect it" not in everything
    assert "Protected by its tag `costguard:protect`" in everything
    assert message["text"].endswith(": $21.96/h")


# Reason codes the demo cannot honestly show, and why. Everything else must arise from events/ on the demo world,
# or from the right-sizing audit `costguard demo` runs on it.
NOT_IN_A_SINGLE_ACCOUNT_DEMO = {
    "member_unreachable": "needs an organization's member accounts (worlds/org.yaml)",
    "ledger_weekly": "a Monday's report of the week before, and the demo plays a Friday "
    "(events/schedule-ledger-report-monday.json, replayed on its own: tests/integration/test_ledger_report_flow.py)",
    "costguard_alarm": "costguard's own CloudWatch alarms on its functions and queues, which a replay never trips",
}
# Codes a single-account demo could show but whose events or world entries are not written yet: remove each one
# here when the demo shows it (the test fails until then, so the list cannot go stale).
NOT_YET_IN_THE_DEMO: set[str] = {"job_hang_unknown"}  # a silent job whose logs or GPUs cannot be read


@pytest.fixture(scope="module")
def demo_audit() -> dict[str, Any]:
    from costguard.local.audit import run_audit
    from costguard.local.world import load_world
    from tests.conftest import DEMO_WORLD

    run = run_audit(load_world(DEMO_WORLD))
    assert run.report is not None, run.error
    return run.report


def test_the_demo_shows_every_reason_code_and_every_audit_rule(
    demo_run: Demo, demo_audit: dict[str, Any]
) -> None:
    from costguard.audit.evaluate import RULE_ORDER
    from costguard.model import Reason

    live = {f["reason"] for r in demo_run.run.results for f in r.findings}
    live |= {d["reason"] for r in demo_run.run.results for d in r.decisions}
    audited = {f["reason"] for f in demo_audit["findings"]}
    holdings = {
        Reason.COMMITMENT_CANDIDATE: demo_audit["commitments"]["rows"],
        Reason.ORPHANED_STORAGE: demo_audit["orphaned_storage"]["rows"],
        Reason.UNTAGGED_GPU_SPEND: demo_audit["untagged_gpu_spend"]["rows"],
    }
    audited |= {reason.value for reason, found in holdings.items() if found}
    # Every right-sizing rule has a finding of its own on the demo world.
    assert [r.value for r in RULE_ORDER if r.value not in audited] == []
    assert set(NOT_IN_A_SINGLE_ACCOUNT_DEMO) <= {r.value for r in Reason}
    missing = {r.value for r in Reason} - live - audited - set(NOT_IN_A_SINGLE_ACCOUNT_DEMO)
    assert sorted(missing) == sorted(NOT_YET_IN_THE_DEMO)
    assert not (set(NOT_IN_A_SINGLE_ACCOUNT_DEMO) & (live | audited)), "an exception the demo does show"


def test_owners_appear_as_mentions(demo_run: Demo) -> None:
    """The demo world's owner tags are emails the local Slack app resolves (users.lookupByEmail): a card about
    dana's instance mentions her, as it would in a workspace where she is a member."""
    shown = "\n".join(json.dumps(m) for m in demo_run.run.posted)
    assert "<@U0LOCALDANA>" in shown and "<@U0LOCALLI01>" in shown
    assert "dana@example.com" not in shown  # resolved, never printed as the raw tag
