"""Clicks read from Slack's payload, and what each does, with AWS and Slack replaced by in-memory fakes."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from costguard.act.executor import Outcome
from costguard.interact import actions, resources, state
from costguard.interact.actions import Interactions, UnreadableClick, carry_out, click_of
from costguard.interact.authorize import parse_allowed
from costguard.interact.consumer import Worker, handle_record
from costguard.interact.offers import MemoryOffers, Offer, offer_id
from costguard.local.interactions import LOCAL_CHANNEL, block_actions
from costguard.model import MARK_TAG_KEY, Resource, ResourceKind
from costguard.notify.queue import MemoryNoticeQueue
from costguard.notify.values import action_value
from costguard.policy import SNOOZE_TAG_KEY, Policy
from costguard.pricing import PriceBook

NOW = datetime(2026, 11, 20, 12, 5, tzinfo=UTC)
KEY = "123456789012/us-east-1/ec2_instance/i-0a1f00000000000d1"
POSTED_TS = "1795176000.000100"  # block_actions' message
EVERY_CHOICE = frozenset(
    {
        "costguard:stop",
        "costguard:protect",
        *(f"costguard:keep:{h}" for h in (4, 24, 72, 168)),
        *(f"costguard:mute:{h}" for h in (24, 168, 720)),
    }
)


def offers(owner: str = "", choices: frozenset[str] = EVERY_CHOICE) -> MemoryOffers:
    """costguard's message about KEY's idle GPUs, posted to the local channel, with every element."""
    book = MemoryOffers()
    book.items[offer_id(LOCAL_CHANNEL, KEY, "gpu_idle")] = Offer(
        channel=LOCAL_CHANNEL,
        resource_key=KEY,
        reason="gpu_idle",
        choices=choices,
        messages=frozenset({POSTED_TS}),
        owner=owner,
    )
    return book


class Rejudge:
    def __init__(self, why: str | None = None) -> None:
        self.why = why
        self.asked: list[str] = []

    def refusal(self, reason: Any, resource: Resource, now: datetime) -> str | None:
        self.asked.append(resource.id)
        return self.why


class Slack:
    def __init__(self) -> None:
        self.replies: list[str] = []

    def respond(
        self, response_url: str, text: str, *, replace_original: bool = False, ephemeral: bool = True
    ) -> None:
        assert ephemeral
        self.replies.append(text)

    def user_for(self, owner_tag_value: str) -> str | None:
        return None

    def usergroup_members(self, group_id: str) -> frozenset[str]:
        return frozenset()


class Remediator:
    def __init__(self) -> None:
        self.stopped: list[str] = []

    def stop(self, resource: Resource) -> None:
        self.stopped.append(resource.id)

    def mark(self, resource: Resource, at: datetime, reason: str | None = None) -> None:
        raise AssertionError("a click never marks")

    def unmark(self, resource: Resource) -> None:
        raise AssertionError("a click never unmarks")


class Record:
    seen: set[str] = set()

    def __init__(self, table: str, click: str) -> None:
        self.click = click

    def start(self, **_: Any) -> bool:
        if self.click in Record.seen:
            return False
        Record.seen.add(self.click)
        return True

    def finish(self, outcome: str, detail: str) -> None:
        pass

    def forget(self) -> None:
        Record.seen.discard(self.click)


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    tags: dict[str, str] = {MARK_TAG_KEY: "2026-11-20T12:00:00+00:00"}
    written: list[tuple[str, str]] = []
    Record.seen = set()
    resource = Resource(
        kind=ResourceKind.EC2_INSTANCE, id="i-0a1f00000000000d1", account="123456789012", region="us-east-1"
    )
    monkeypatch.setattr(resources, "read", lambda key: resource.model_copy(update={"tags": dict(tags)}))
    monkeypatch.setattr(resources, "set_tag", lambda r, k, v: written.append((k, v)))
    monkeypatch.setattr(state, "ActionRecord", Record)
    return {"tags": tags, "written": written}


def _deps(
    *,
    dry_run: bool = False,
    allowed: str = "channel",
    book: MemoryOffers | None = None,
    rejudge: Rejudge | None = None,
) -> Interactions:
    return Interactions(
        table="t",
        policy=Policy(dry_run=dry_run),
        allowed=parse_allowed(allowed),
        slack=Slack(),
        queue=MemoryNoticeQueue(),
        remediator=Remediator(),
        prices=PriceBook(),
        offers=book if book is not None else offers(),
        rejudge=rejudge if rejudge is not None else Rejudge(),
    )


def _click(action: str, value: str, user: str = "U0OPS00001") -> actions.Click:
    return click_of(block_actions(action, value, user=user, action_ts="1795176300.1"))


def test_a_keep_writes_the_snooze_tag_only_and_tells_the_thread_who(world: dict[str, Any]) -> None:
    deps = _deps()
    result = carry_out(_click("costguard:keep", action_value("gpu_idle", KEY, 24)), deps, NOW)
    assert result.outcome == "done"
    assert world["written"] == [(SNOOZE_TAG_KEY, "2026-11-21T12:05:00+00:00")]
    [notice] = deps.queue.sent  # type: ignore[attr-defined]
    assert notice.actor == "U0OPS00001"
    assert notice.decision.note == "kept running until 2026-11-21 12:05 UTC"  # who: the actor, a mention
    assert notice.outcome == Outcome(done=True, detail=f"tagged {SNOOZE_TAG_KEY}=2026-11-21T12:05:00+00:00")


def test_the_same_click_twice_acts_once(world: dict[str, Any]) -> None:
    deps = _deps()
    click = _click("costguard:protect", action_value("gpu_idle", KEY))
    assert carry_out(click, deps, NOW).outcome == "done"
    assert carry_out(click, deps, NOW).outcome == "duplicate"
    assert world["written"] == [("costguard:protect", "true")]


def test_stop_now_is_refused_in_notify_mode(world: dict[str, Any]) -> None:
    deps = _deps(dry_run=True)
    result = carry_out(_click("costguard:stop", action_value("gpu_idle", KEY)), deps, NOW)
    assert result.outcome == "refused"
    assert deps.remediator.stopped == []  # type: ignore[attr-defined]
    assert "notify mode" in deps.slack.replies[0]  # type: ignore[attr-defined]
    assert deps.queue.sent == []  # type: ignore[attr-defined]


def test_stop_now_stops_through_the_executor_in_remediate_mode(world: dict[str, Any]) -> None:
    deps = _deps()
    assert carry_out(_click("costguard:stop", action_value("gpu_idle", KEY)), deps, NOW).outcome == "done"
    assert deps.remediator.stopped == ["i-0a1f00000000000d1"]  # type: ignore[attr-defined]
    [notice] = deps.queue.sent  # type: ignore[attr-defined]
    assert notice.decision.action == "stop" and notice.actor == "U0OPS00001"


def test_an_unauthorized_click_changes_nothing(world: dict[str, Any]) -> None:
    deps = _deps(allowed="owner")
    result = carry_out(_click("costguard:keep", action_value("gpu_idle", KEY, 4)), deps, NOW)
    assert result.outcome == "refused" and world["written"] == []
    assert deps.slack.replies and deps.queue.sent == []  # type: ignore[attr-defined]


def test_keeping_a_protected_resource_is_refused_politely(world: dict[str, Any]) -> None:
    world["tags"]["costguard:protect"] = "true"
    deps = _deps()
    assert (
        carry_out(_click("costguard:keep", action_value("gpu_idle", KEY, 4)), deps, NOW).outcome == "refused"
    )
    assert "protected" in deps.slack.replies[0]  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "payload",
    [
        {"type": "view_submission", "user": {"id": "U1"}, "actions": [{"action_id": "costguard:keep"}]},
        block_actions("someone:else", f"gpu_idle|{KEY}"),
        block_actions("costguard:keep", f"gpu_idle|{KEY}"),  # a keep without hours
        {"type": "block_actions"},
    ],
)
def test_a_payload_that_is_not_a_click_on_costguards_elements_is_unreadable(payload: dict[str, Any]) -> None:
    with pytest.raises(UnreadableClick):
        click_of(payload)


def test_an_unreadable_queued_record_raises_so_the_queue_keeps_it() -> None:
    work = Worker(signing_secret="s" * 32, deps=_deps())
    for body in ("not json", '{"payload": {"type": "block_actions"}}', "[]"):
        with pytest.raises(UnreadableClick):
            handle_record(body, {"SentTimestamp": str(int(NOW.timestamp() * 1000))}, work, NOW)
