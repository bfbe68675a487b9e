"""Group messages, buttons, owners and replies: what a channel reads when costguard has many findings at once,
and the interactive elements a person answers with."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from costguard.act.executor import Outcome
from costguard.local.sink import block_problems
from costguard.model import MARK_TAG_KEY, Action, Decision, Finding, Reason, Resource, ResourceKind
from costguard.notify.group_message import build_group_message, log_link
from costguard.notify.message import (
    KEEP,
    MUTE,
    PROTECT,
    STOP_NOW,
    actions_for,
    build_message,
    build_reply,
    owner_text,
)
from costguard.notify.notice import GroupNotice, Notice, group
from costguard.notify.values import MAX_OPTION_VALUE, action_value, parse_action_value

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
ACCOUNT, REGION = "123456789012", "us-east-1"
HOSTILE = "<!channel>"
USER = "U0123ABCDEF"
MARKED = {MARK_TAG_KEY: "2026-11-20T11:00:00+00:00"}  # marked by costguard: Stop now can stop it


def _resource(
    n: int = 0,
    *,
    kind: ResourceKind = ResourceKind.EC2_INSTANCE,
    name: str | None = None,
    tags: dict[str, str] | None = None,
    rid: str | None = None,
) -> Resource:
    return Resource(
        kind=kind,
        id=rid or f"i-{n:017x}",
        account=ACCOUNT,
        region=REGION,
        name=name,
        instance_type="p4d.24xlarge",
        tags={"team": "ml", **(tags or {})},
    )


def _notice(
    resource: Resource,
    *,
    hourly: float | None = 1.0,
    action: Action = Action.NOTIFY,
    outcome: Outcome | None = None,
    dry_run: bool = False,
    summary: str = "GPU idle for 2h",
    actor: str | None = None,
    reason: Reason = Reason.GPU_IDLE,
) -> Notice:
    finding = Finding(
        reason=reason, resource=resource, summary=summary, observed_at=NOW, hourly_usd=hourly, remediable=True
    )
    decision = Decision(
        action=action,
        reason=reason,
        finding=finding,
        dry_run=dry_run,
        note="grace period over",
        decided_at=NOW,
    )
    return Notice(
        decision=decision,
        outcome=outcome or Outcome(done=False, detail="no change to the resource"),
        actor=actor,
    )


def _group(
    count: int, *, digest: bool = False, source: str | None = None, hostile_first: bool = False
) -> GroupNotice:
    notices = [
        _notice(
            _resource(n, name=HOSTILE if hostile_first and n == count - 1 else f"trainer-{n}"),
            hourly=float(n + 1),
        )
        for n in range(count)
    ]
    return group(notices, routing_tag_key="team", digest=digest, source=source)


def _strings(value: Any) -> list[str]:
    """Every string anywhere in a payload."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def _kinds(message: dict[str, Any]) -> list[str]:
    return [block["type"] for block in message["blocks"]]


def _row_sections(message: dict[str, Any]) -> list[str]:
    """The row sections: the sections after the summary that start with a bold name."""
    return [
        b["text"]["text"]
        for b in message["blocks"][2:]
        if b["type"] == "section" and b["text"]["text"].startswith("*")
    ]


# -- build_group_message ------------------------------------------------------------------------------------


def test_group_header_says_the_count_and_the_summary_the_total() -> None:
    grouped = _group(7)
    message = build_group_message(grouped)
    assert message["blocks"][0]["type"] == "header"
    assert message["blocks"][0]["text"]["text"] == "costguard: Idle GPU instance: 7 EC2 instances"
    total = sum(range(1, 8))
    assert (
        f"*7 findings* on 7 EC2 instances costing *${total:,.2f}/h* together"
        in message["blocks"][1]["text"]["text"]
    )
    assert message["text"] == f"costguard: 7 findings ({ACCOUNT}/{REGION}): ${total:,.2f}/h"
    assert block_problems(message) == []


def test_group_rows_are_costliest_first() -> None:
    message = build_group_message(_group(6))
    rows = _row_sections(message)
    assert len(rows) == 6
    shown = [float(row.split("$", 1)[1].split("/h", 1)[0]) for row in rows]
    assert shown == [6.0, 5.0, 4.0, 3.0, 2.0, 1.0]
    assert "trainer-5" in rows[0] and "trainer-0" in rows[-1]


def test_a_non_interactive_group_has_no_actions() -> None:
    message = build_group_message(_group(12), interactive=False)
    assert "actions" not in _kinds(message)


def test_each_shown_row_has_its_own_actions_when_interactive() -> None:
    message = build_group_message(_group(12), interactive=True)
    kinds = _kinds(message)
    # The first ten rows: each section is followed by its own actions block.
    assert kinds.count("actions") == 10
    for n, block in enumerate(message["blocks"]):
        if block["type"] == "actions":
            assert message["blocks"][n - 1]["type"] == "section"
    assert block_problems(message) == []


def test_more_rows_than_shown_say_and_n_more_with_a_log_link() -> None:
    grouped = _group(60, source="/aws/lambda/costguard-sweep")
    link = log_link(REGION, "/aws/lambda/costguard-sweep", grouped.id)
    assert link is not None
    message = build_group_message(grouped, more_link=link)
    last = message["blocks"][-1]
    assert last["type"] == "context"
    note = last["elements"][0]["text"]
    assert note.startswith("… and 10 more, cheaper ones")  # 10 rows in full, 40 in brief
    assert f"<{link}|the full list>" in note
    assert block_problems(message) == []
    assert len(message["blocks"]) < 50


def test_a_link_that_is_not_the_console_is_not_linked() -> None:
    grouped = _group(60, source="/aws/lambda/costguard-sweep")
    message = build_group_message(grouped, more_link="https://evil.example.com/|click")
    note = message["blocks"][-1]["elements"][0]["text"]
    assert "evil" not in note and "<" not in note


def test_no_more_note_when_every_row_is_shown() -> None:
    message = build_group_message(_group(50, source="/aws/lambda/costguard-sweep"))
    assert "more, cheaper ones" not in json.dumps(message)


def test_a_hostile_name_is_escaped_everywhere_in_a_group() -> None:
    grouped = _group(60, hostile_first=True, source="x")
    message = build_group_message(grouped, interactive=False)
    everything = "\n".join(_strings(message))
    assert "&lt;!channel&gt;" in _row_sections(message)[0]
    assert HOSTILE not in everything
    assert block_problems(message) == []


def test_a_hostile_name_in_a_brief_row_is_escaped() -> None:
    notices = [_notice(_resource(n, name=f"t{n}"), hourly=100.0 - n) for n in range(20)]
    notices.append(_notice(_resource(99, name=HOSTILE), hourly=0.5))  # in the brief lines
    message = build_group_message(group(notices, routing_tag_key="team"))
    everything = "\n".join(_strings(message))
    assert "&lt;!channel&gt;" in everything
    assert HOSTILE not in everything


def test_a_huge_group_stays_within_slack_limits() -> None:
    notices = [
        _notice(_resource(n, name=("N" * 300) + HOSTILE), hourly=float(n), summary="S" * 5000)
        for n in range(100)
    ]
    grouped = group(notices, routing_tag_key="team", source="/aws/lambda/costguard-sweep")
    message = build_group_message(grouped, interactive=True, more_link=log_link(REGION, "g", grouped.id))
    assert len(message["blocks"]) < 50
    assert block_problems(message) == []
    assert HOSTILE not in "\n".join(_strings(message))


def test_the_digest_says_still_open_after_a_day() -> None:
    message = build_group_message(_group(4, digest=True))
    assert (
        message["blocks"][0]["text"]["text"]
        == "costguard: Still open after a day: Idle GPU instance: 4 EC2 instances"
    )
    assert "is not told again on its own" in message["blocks"][1]["text"]["text"]
    assert "Still open" not in json.dumps(build_group_message(_group(4)))


def test_owners_are_shown_per_row() -> None:
    grouped = _group(4)
    key = grouped.rows[0].decision.resource.key
    message = build_group_message(grouped, owners={key: USER})
    rows = _row_sections(message)
    assert rows[0].endswith(f"owner <@{USER}>")
    assert "owner" not in rows[1]


# -- actions_for ---------------------------------------------------------------------------------------------


def _elements(notice: Notice, *, short: bool = False) -> list[dict[str, Any]]:
    block = actions_for(notice, short=short)
    assert block is not None
    elements: list[dict[str, Any]] = block.to_dict()["elements"]
    return elements


@pytest.mark.parametrize(
    "kind", [ResourceKind.EC2_INSTANCE, ResourceKind.NOTEBOOK, ResourceKind.TRAINING_JOB]
)
def test_what_costguard_has_marked_gets_keep_stop_protect_and_mute(kind: ResourceKind) -> None:
    notice = _notice(_resource(rid="res-1", kind=kind, tags=MARKED))
    assert [e["action_id"] for e in _elements(notice)] == [KEEP, STOP_NOW, PROTECT, MUTE]
    assert [e["action_id"] for e in _elements(notice, short=True)] == [KEEP, STOP_NOW, MUTE]


@pytest.mark.parametrize(
    "notice",
    [
        _notice(_resource(1, tags={"costguard:protect": "true"})),  # protected
        _notice(_resource(2), action=Action.STOP, outcome=Outcome(done=True, detail="stopped")),  # stopped
        _notice(_resource(rid="ep-1", kind=ResourceKind.ENDPOINT), reason=Reason.ENDPOINT_IDLE),
        _notice(_resource(rid="cr-1", kind=ResourceKind.CAPACITY_RESERVATION)),
    ],
    ids=["protected", "stopped", "endpoint", "capacity-reservation"],
)
def test_mute_only_for_what_cannot_be_stopped_from_slack(notice: Notice) -> None:
    assert [e["action_id"] for e in _elements(notice)] == [MUTE]


def test_a_dry_run_stop_keeps_keep_and_protect_but_has_no_stop_now() -> None:
    """Notify mode stops nothing: a Stop now there could only answer that it does nothing."""
    notice = _notice(
        _resource(3, tags=MARKED),
        action=Action.STOP,
        dry_run=True,
        outcome=Outcome(done=False, detail="dry run: would stop"),
    )
    assert [e["action_id"] for e in _elements(notice)] == [KEEP, PROTECT, MUTE]


def test_every_value_parses_back_to_the_reason_and_resource() -> None:
    resource = _resource(rid="i-0abc", tags=MARKED)
    notice = _notice(resource)
    elements = _elements(notice)
    values: list[tuple[str, bool]] = []
    for element in elements:
        if element["type"] == "static_select":
            values.extend((o["value"], True) for o in element["options"])
        else:
            values.append((element["value"], False))
    assert len(values) == 4 + 1 + 1 + 3  # keep options, stop, protect, mute options
    for value, with_hours in values:
        parsed = parse_action_value(value, with_hours=with_hours)
        assert parsed.reason is Reason.GPU_IDLE
        assert parsed.resource.key == resource.key
        assert (parsed.hours is not None) is with_hours
        assert len(value) <= MAX_OPTION_VALUE or not with_hours


def test_an_id_too_long_for_an_option_value_gets_no_actions() -> None:
    resource = _resource(rid="i-" + "a" * 140)
    with pytest.raises(ValueError, match="Slack allows 150"):
        action_value(Reason.GPU_IDLE.value, resource.key, 720)
    assert actions_for(_notice(resource)) is None
    message = build_message(_notice(resource), interactive=True)
    assert "actions" not in _kinds(message)


def test_an_id_that_just_fits_gets_actions() -> None:
    base = len(action_value(Reason.GPU_IDLE.value, _resource(rid="i-").key, 720))
    resource = _resource(rid="i-" + "a" * (MAX_OPTION_VALUE - base))
    assert len(action_value(Reason.GPU_IDLE.value, resource.key, 720)) == MAX_OPTION_VALUE
    assert actions_for(_notice(resource)) is not None


def test_the_stop_confirmation_escapes_a_hostile_name() -> None:
    """The Stop now confirmation must not carry a Name tag's mention or link as mrkdwn."""
    elements = _elements(_notice(_resource(4, name=HOSTILE, tags=MARKED)))
    [stop] = [e for e in elements if e["action_id"] == STOP_NOW]
    confirm_text = stop["confirm"]["text"]
    assert confirm_text["type"] == "plain_text" or HOSTILE not in confirm_text["text"]


# -- owner_text ----------------------------------------------------------------------------------------------


def test_an_owner_tag_that_is_a_user_id_is_a_mention() -> None:
    assert owner_text(_resource(tags={"owner": USER}), None) == f"<@{USER}>"


def test_an_email_owner_resolved_is_a_mention() -> None:
    assert owner_text(_resource(tags={"owner": "alice@example.com"}), USER) == f"<@{USER}>"


def test_an_email_owner_unresolved_is_the_escaped_email() -> None:
    assert owner_text(_resource(tags={"owner": "alice@example.com"}), None) == "alice@example.com"
    hostile = owner_text(_resource(tags={"owner": "<!channel>@example.com"}), None)
    assert hostile == "&lt;!channel&gt;@example.com"


def test_a_mention_that_is_not_a_user_id_is_not_trusted() -> None:
    assert owner_text(_resource(tags={"owner": "alice@example.com"}), "<!channel>") == "alice@example.com"


def test_no_owner_tag_is_none() -> None:
    assert owner_text(_resource(), None) is None
    assert owner_text(_resource(tags={"owner": "   "}), None) is None


# -- replies and actors ---------------------------------------------------------------------------------------


def test_a_reply_with_an_actor_mentions_them_and_escapes_the_summary() -> None:
    notice = _notice(_resource(5), summary=f"{HOSTILE} idle", actor=USER)
    reply = build_reply(notice)
    text = reply["blocks"][0]["text"]["text"]
    assert "&lt;!channel&gt; idle" in text
    assert HOSTILE not in "\n".join(_strings(reply))
    assert f"<@{USER}> at 2026-11-20 12:00 UTC." in text


def test_a_reply_escapes_a_hostile_summary_and_name() -> None:
    notice = _notice(_resource(5, name=HOSTILE), summary=f"{HOSTILE} idle")
    reply = build_reply(notice)
    assert "&lt;!channel&gt; idle" in reply["blocks"][0]["text"]["text"]
    assert HOSTILE not in "\n".join(_strings(reply))
    assert block_problems(reply) == []


def test_a_reply_to_a_stop_is_not_escaped_twice() -> None:
    notice = _notice(_resource(6), action=Action.STOP, outcome=Outcome(done=True, detail="stopped"))
    text = build_reply(notice)["blocks"][0]["text"]["text"]
    assert "aws ec2 start-instances" in text
    assert "&amp;gt;" not in text


def test_a_message_with_an_actor_says_who_asked() -> None:
    notice = _notice(
        _resource(7), action=Action.STOP, outcome=Outcome(done=True, detail="stopped"), actor=USER
    )
    message = build_message(notice)
    assert any(f"Asked by <@{USER}> at 2026-11-20 12:00 UTC." in s for s in _strings(message))


def test_an_actor_that_is_not_a_user_id_is_not_shown() -> None:
    notice = _notice(_resource(7), actor="<!channel>")
    message = build_message(notice)
    assert "Asked by" not in json.dumps(message)
    assert HOSTILE not in "\n".join(_strings(message))


def test_every_reason_has_a_title_in_words_and_a_group_says_what_it_is_about() -> None:
    from costguard.model import Reason, ResourceKind
    from costguard.notify.group_message import group_title
    from costguard.notify.titles import TITLES

    assert set(TITLES) == set(Reason)
    assert all(title != reason.value and "_" not in title for reason, title in TITLES.items())
    assert (
        group_title({"gpu_idle": 3}, 3, 3, ResourceKind.EC2_INSTANCE) == "Idle GPU instance: 3 EC2 instances"
    )
    assert group_title({"gpu_metrics_missing": 1}, 1, 1, ResourceKind.EC2_INSTANCE) == (
        "No GPU metrics: 1 EC2 instance"
    )
    assert group_title({"gpu_idle": 4, "gpu_starved": 3}, 7, 6, ResourceKind.EC2_INSTANCE) == (
        "7 findings on 6 EC2 instances"
    )
