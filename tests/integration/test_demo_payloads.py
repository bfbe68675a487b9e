"""Every Slack payload of the demo reads as sentences: no Python reprs, no field that does not apply to its
resource's kind, a dollar figure in the notification text, and how to get a stopped resource back."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from costguard.local.render import render
from costguard.local.replay import latest_event_time, replay
from costguard.local.sink import SlackSink
from costguard.local.stack import LocalStack
from costguard.local.world import World
from costguard.notify.message import build_message
from costguard.notify.notice import Notice
from tests.conftest import EVENTS

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
        yield from (e["text"] for e in block.get("elements", []) if "text" in e)


@pytest.fixture(scope="module", params=["notify", "remediate"])
def demo(request: pytest.FixtureRequest) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(decision, Slack payload) pairs of `costguard demo`: every file in events/ on the embedded stack, each
    payload as the local webhook received it, with the decision the notifier built it from."""
    import costguard.flows.notifier as notifier
    from costguard.local.world import load_world
    from tests.conftest import DEMO_WORLD

    built: list[tuple[dict[str, Any], dict[str, Any]]] = []

    def recording(notice: Notice) -> dict[str, Any]:
        payload = build_message(notice)
        built.append((notice.decision.summary(), payload))
        return payload

    world: World = load_world(DEMO_WORLD)
    events: list[str | Path] = sorted(EVENTS.glob("*.json"))
    with (
        pytest.MonkeyPatch.context() as patch,
        SlackSink() as sink,
        LocalStack(world, mode=request.param, sink=sink, until=latest_event_time(events)) as stack,
    ):
        patch.setattr(notifier, "build_message", recording)
        results = replay(stack, list(events))
        received = list(sink.messages)
    assert all(r.ok for r in results), [r.error for r in results if not r.ok]
    # Every payload the webhook received is one the notifier built, and the demo posts plenty.
    assert len(received) == len(built) > 30
    for message, (_, payload) in zip(received, built, strict=True):
        assert {k: v for k, v in message.items() if k != "channel"} == payload
    return built


def test_no_payload_shows_a_python_repr(demo: list[tuple[dict[str, Any], dict[str, Any]]]) -> None:
    for decision, message in demo:
        for text in _texts(message):
            for repr_ in REPRS:
                assert repr_ not in text, (
                    f"{decision['reason']} {decision['resource_id']}: {repr_!r} in {text!r}"
                )


def test_no_field_that_does_not_apply_to_the_kind(demo: list[tuple[dict[str, Any], dict[str, Any]]]) -> None:
    kinds = set()
    for decision, message in demo:
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
        if decision["hourly_usd"] is not None:
            assert f"${decision['hourly_usd']:,.2f}/h" in message["text"], message["text"]
        if decision["cost_usd"] is not None:
            assert f"${decision['cost_usd']:,.2f}" in message["text"], message["text"]
        unreadable = "could not read" in message["blocks"][1]["text"]["text"]  # a budget alert with no figure
        if decision["reason"] in ("budget_breach", "cost_anomaly", "training_digest", "job_failure_loop"):
            assert "$" in message["text"] or unreadable, message["text"]


def test_a_stop_says_how_to_get_the_resource_back(demo: list[tuple[dict[str, Any], dict[str, Any]]]) -> None:
    stops = [(d, m) for d, m in demo if d["action"] == "stop"]
    for decision, message in stops:
        everything = "\n".join(_texts(message))
        if decision["resource_kind"] == "ec2_instance":
            assert f"aws ec2 start-instances --instance-ids {decision['resource_id']}" in everything
        elif decision["resource_kind"] == "notebook_instance":
            assert "StartNotebookInstance" in everything
        elif decision["resource_kind"] == "training_job":
            assert "cannot be started again: re-run it" in everything


def test_the_terminal_view_shows_what_slack_shows(demo: list[tuple[dict[str, Any], dict[str, Any]]]) -> None:
    shown = "\n".join(render(message) for _, message in demo)
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
    resource = Resource(kind=ResourceKind.BUDGET, id="b", account="123456789012", region="us-east-1")
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
        reason=Reason.BUDGET_BREACH, resource=resource, summary="s", observed_at=now, evidence=evidence
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
    assert "• Price per hour: $3.83" in evidence_text
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
