"""Only Slack can click: the actions worker verifies every queued message's Slack signature itself, acts only on
what costguard offered (that channel, message, resource, reason and menu choice), authorizes the owner recorded
when the finding was first told, and judges a Stop now again at the click."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from costguard.interact import resources, state
from costguard.interact.actions import Interactions, UnreadableClick, carry_out, click_of
from costguard.interact.authorize import parse_allowed
from costguard.interact.consumer import UnverifiedClick, Worker, handle_record
from costguard.interact.offers import MemoryOffers, offered_in
from costguard.interact.verify import sign
from costguard.local.interactions import LOCAL_CHANNEL, LOCAL_SIGNING_SECRET, block_actions, form_body
from costguard.model import MARK_TAG_KEY, Resource, ResourceKind
from costguard.notify.queue import MemoryNoticeQueue
from costguard.notify.values import ActionId, action_value
from costguard.policy import Policy
from costguard.pricing import PriceBook
from tests.unit.test_interact_actions import (
    KEY,
    NOW,
    POSTED_TS,
    Rejudge,
    Remediator,
    Slack,
    offers,
)
from tests.unit.test_interact_actions import (
    world as world,
)

STOP = action_value("gpu_idle", KEY)


def _deps(**kw: Any) -> Interactions:
    return Interactions(
        table="t",
        policy=Policy(dry_run=kw.pop("dry_run", False)),
        allowed=parse_allowed(kw.pop("allowed", "channel")),
        slack=kw.pop("slack", Slack()),
        queue=MemoryNoticeQueue(),
        remediator=Remediator(),
        prices=PriceBook(),
        offers=kw.pop("book", offers()),
        rejudge=kw.pop("rejudge", Rejudge()),
    )


def _message(payload: dict[str, Any], *, signed_at: datetime, secret: str = LOCAL_SIGNING_SECRET) -> str:
    """The endpoint's queued message for this payload, signed as Slack would sign it with ``secret``."""
    body = form_body(payload)
    stamp = int(signed_at.timestamp())
    return json.dumps({"body": body, "timestamp": str(stamp), "signature": sign(body, stamp, secret)})


def _sent(at: datetime) -> dict[str, str]:
    return {"SentTimestamp": str(int(at.timestamp() * 1000))}


# -- the queue: a message whose signature does not hold changes nothing ------------------------------------------


def test_a_signed_message_is_carried_out(world: dict[str, Any]) -> None:
    deps = _deps()
    work = Worker(LOCAL_SIGNING_SECRET, deps)
    result = handle_record(
        _message(block_actions("costguard:stop", STOP), signed_at=NOW), _sent(NOW), work, NOW
    )
    assert result.outcome == "done" and deps.remediator.stopped == ["i-0a1f00000000000d1"]  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "forge",
    [
        pytest.param(lambda p: json.dumps({"payload": p, "received_at": NOW.isoformat()}), id="unsigned"),
        pytest.param(
            lambda p: _message(p, signed_at=NOW, secret="anothersecret0123456789abcdefgh"),
            id="another-secret",
        ),
        pytest.param(
            lambda p: json.dumps(
                {**json.loads(_message(p, signed_at=NOW)), "body": form_body({**p, "x": 1})}
            ),
            id="body-changed",
        ),
        pytest.param(
            lambda p: _message(p, signed_at=NOW - timedelta(minutes=6)), id="signed-6-minutes-before"
        ),
        pytest.param(
            lambda p: json.dumps({**json.loads(_message(p, signed_at=NOW)), "body": 7}), id="body-not-text"
        ),
    ],
)
def test_a_forged_message_on_the_queue_changes_nothing(world: dict[str, Any], forge: Any) -> None:
    deps = _deps()
    work = Worker(LOCAL_SIGNING_SECRET, deps)
    for action, value in [
        ("costguard:stop", STOP),
        ("costguard:keep", action_value("gpu_idle", KEY, 168)),
        ("costguard:protect", STOP),
        ("costguard:mute", action_value("gpu_idle", KEY, 720)),
    ]:
        payload = block_actions(action, value, user="U0LOCALOPS1")
        with pytest.raises(UnverifiedClick):
            handle_record(forge(payload), _sent(NOW), work, NOW)
    assert world["written"] == [] and deps.remediator.stopped == []  # type: ignore[attr-defined]
    assert deps.queue.sent == [] and deps.slack.replies == []  # type: ignore[attr-defined]


def test_the_age_is_measured_from_when_sqs_took_the_message_not_from_now(world: dict[str, Any]) -> None:
    work = Worker(LOCAL_SIGNING_SECRET, _deps())
    message = _message(block_actions("costguard:protect", STOP), signed_at=NOW)
    # Redelivered an hour later (a failure, then the queue's retry): still the request Slack sent then.
    assert (
        handle_record(message, _sent(NOW + timedelta(seconds=2)), work, NOW + timedelta(hours=1)).outcome
        == "done"
    )
    # Queued an hour after it was signed: a replay of a captured request, whatever the message claims.
    with pytest.raises(UnverifiedClick, match="Stale"):
        handle_record(message, _sent(NOW + timedelta(hours=1)), work, NOW + timedelta(hours=1))
    with pytest.raises(UnverifiedClick, match="SentTimestamp"):
        handle_record(message, {}, work, NOW)


# -- every value a click carries is one costguard offered --------------------------------------------------------


@pytest.mark.parametrize(
    ("action", "hours"),
    [("costguard:keep", 8760), ("costguard:keep", 2), ("costguard:mute", 8760), ("costguard:mute", 4)],
)
def test_a_duration_off_the_menu_is_refused(world: dict[str, Any], action: str, hours: int) -> None:
    with pytest.raises(UnreadableClick, match="menu"):
        click_of(block_actions(action, action_value("gpu_idle", KEY, hours)))
    assert world["written"] == []


def _click(action: str, value: str, **where: Any) -> Any:
    return click_of(block_actions(action, value, action_ts="1795176300.1", **where))


@pytest.mark.parametrize(
    ("click", "why"),
    [
        pytest.param(
            lambda: _click("costguard:stop", STOP, channel="C0ELSEWHERE"), "did not post", id="other-channel"
        ),
        pytest.param(
            lambda: _click("costguard:stop", STOP, message_ts="1795179999.000100"),
            "did not post",
            id="other-message",
        ),
        pytest.param(
            lambda: _click(
                "costguard:stop", action_value("gpu_idle", KEY.replace("123456789012", "210987654321"))
            ),
            "did not post",
            id="other-account",
        ),
        pytest.param(
            lambda: _click("costguard:stop", action_value("gpu_idle", KEY.replace("us-east-1", "eu-west-1"))),
            "did not post",
            id="other-region",
        ),
        pytest.param(
            lambda: _click("costguard:stop", action_value("job_stalled", KEY)),
            "did not post",
            id="other-reason",
        ),
        pytest.param(
            lambda: _click("costguard:protect", STOP),
            "did not offer this choice",
            id="protect-not-on-that-card",
        ),
    ],
)
def test_a_click_costguard_did_not_offer_there_changes_nothing(
    world: dict[str, Any], click: Any, why: str
) -> None:
    book = offers(choices=frozenset({"costguard:stop", "costguard:keep:4", "costguard:mute:24"}))
    deps = _deps(book=book)
    result = carry_out(click(), deps, NOW)
    assert result.outcome == "refused" and why in result.detail
    assert world["written"] == [] and deps.remediator.stopped == []  # type: ignore[attr-defined]


def test_offers_are_read_from_the_message_as_posted() -> None:
    keep = [{"value": action_value("gpu_idle", KEY, h)} for h in (4, 24)]
    message = {
        "blocks": [
            {"type": "section", "text": {"type": "mrkdwn", "text": "hi"}},
            {
                "type": "actions",
                "elements": [
                    {"type": "static_select", "action_id": "costguard:keep", "options": keep},
                    {"type": "button", "action_id": "costguard:stop", "value": STOP},
                    {"type": "button", "action_id": "someone:else", "value": STOP},
                    {"type": "button", "action_id": "costguard:protect", "value": "not|a value"},
                ],
            },
        ]
    }
    assert offered_in(message) == {
        (KEY, "gpu_idle"): {"costguard:keep:4", "costguard:keep:24", "costguard:stop"}
    }
    book = MemoryOffers()
    book.add(LOCAL_CHANNEL, POSTED_TS, message, owners={KEY: "dana"})
    book.add(LOCAL_CHANNEL, "1795176999.000100", {"blocks": []}, owners={KEY: "guest"})
    offer = book.offered(LOCAL_CHANNEL, KEY, "gpu_idle", NOW)
    assert offer is not None and offer.offers(ActionId.KEEP, 24.0) and not offer.offers(ActionId.KEEP, 72.0)
    assert offer.owner == "dana"


# -- the owner that authorizes is the one recorded when the finding was first told --------------------------------


class Directory(Slack):
    def user_for(self, owner_tag_value: str) -> str | None:
        return {"dana": "U0DANA0001", "guest": "U0GUEST001"}.get(owner_tag_value)


def test_a_guest_who_retags_owner_after_the_finding_cannot_stop_it(world: dict[str, Any]) -> None:
    world["tags"]["owner"] = "guest"  # plain ec2:CreateTags, after costguard told dana's finding
    deps = _deps(allowed="owner", book=offers(owner="dana"), slack=Directory())
    result = carry_out(_click("costguard:stop", STOP, user="U0GUEST001"), deps, NOW)
    assert result.outcome == "refused" and "owner tag changed" in result.detail
    assert "dana then, guest now" in result.detail
    assert deps.remediator.stopped == []  # type: ignore[attr-defined]
    # dana, the owner recorded then, still may.
    deps = _deps(allowed="owner", book=offers(owner="dana"), slack=Directory())
    assert carry_out(_click("costguard:stop", STOP, user="U0DANA0001"), deps, NOW).outcome == "done"


# -- Stop now never stops work -------------------------------------------------------------------------------------


def test_stop_now_is_refused_when_the_resource_is_busy_again(world: dict[str, Any]) -> None:
    rejudge = Rejudge("i-0a1f00000000000d1 is working now (busiest GPU at 95%)")
    deps = _deps(rejudge=rejudge)
    result = carry_out(_click("costguard:stop", STOP), deps, NOW)
    assert result.outcome == "refused" and "working now" in result.detail
    assert rejudge.asked == ["i-0a1f00000000000d1"] and deps.remediator.stopped == []  # type: ignore[attr-defined]
    assert "working now" in deps.slack.replies[0]  # type: ignore[attr-defined]


def test_stop_now_without_a_way_to_judge_again_stops_nothing(world: dict[str, Any]) -> None:
    deps = _deps()
    deps = Interactions(**{**deps.__dict__, "rejudge": None})
    assert carry_out(_click("costguard:stop", STOP), deps, NOW).outcome == "refused"
    assert deps.remediator.stopped == []  # type: ignore[attr-defined]


# -- Mute works on every kind it is offered on ----------------------------------------------------------------------


def test_mute_of_a_budget_reads_nothing_and_mutes(monkeypatch: pytest.MonkeyPatch) -> None:
    muted: list[tuple[str, str]] = []
    monkeypatch.setattr(state, "mute", lambda table, key, reason, until, by: muted.append((key, reason)))
    monkeypatch.setattr(state, "ActionRecord", _Record)
    monkeypatch.setattr(resources, "read", _no_read)
    budget = "123456789012/global/budget/gpu-monthly|ACTUAL|100"
    value = action_value("budget_breach", budget.replace("|", "-"), 24)
    key = value.split("|", 2)[2]
    book = MemoryOffers()
    book.add(
        LOCAL_CHANNEL,
        POSTED_TS,
        {
            "blocks": [
                {
                    "type": "actions",
                    "elements": [{"action_id": "costguard:mute", "options": [{"value": value}]}],
                }
            ]
        },
    )
    deps = _deps(book=book)
    result = carry_out(_click("costguard:mute", value), deps, NOW)
    assert result.outcome == "done", result.detail
    assert muted == [(key, "budget_breach")]


class _Record:
    def __init__(self, table: str, click: str) -> None:
        pass

    def start(self, **_: Any) -> bool:
        return True

    def finish(self, outcome: str, detail: str) -> None:
        pass

    def forget(self) -> None:
        pass


def _no_read(key: Any) -> Resource:
    raise AssertionError("a mute of a budget reads nothing")


def test_a_mark_for_another_reason_is_not_stopped_from_a_stale_card() -> None:
    from costguard.interact.rejudge import mark_refusal
    from costguard.model import Reason

    job = Resource(
        kind=ResourceKind.TRAINING_JOB,
        id="j",
        account="123456789012",
        region="us-east-1",
        tags={MARK_TAG_KEY: f"{datetime(2026, 11, 20, 12, tzinfo=UTC).isoformat()} job_cost_ceiling"},
    )
    assert "cleared" in (mark_refusal(Reason.JOB_STALLED, job) or "")
    assert mark_refusal(Reason.JOB_COST_CEILING, job) is None
