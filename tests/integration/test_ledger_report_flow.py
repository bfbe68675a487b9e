"""The savings ledger's daily run through the embedded AWS and the Slack sink (issue 43): on a Monday, one
message per team in the team's own channel (the default one for a team no route names), with the week's
figures as the ledger has them; the day's line in the default channel; a schedule delivered twice posts nothing
twice; the routing is the deployed rule's."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from costguard.act.executor import execute
from costguard.act.ledger_book import DynamoLedger
from costguard.local.replay import replay
from costguard.local.sink import SlackSink
from costguard.local.stack import TABLE, LocalStack
from costguard.local.world import World
from costguard.model import Action, Decision, Finding, Reason, Resource, ResourceKind
from tests.conftest import EVENTS

MONDAY = EVENTS / "schedule-ledger-report-monday.json"  # 2026-11-23 00:00 UTC
LAST_WEEK = datetime(2026, 11, 16, tzinfo=UTC)
H = timedelta(hours=1)


class _Stops:
    def stop(self, resource: Resource) -> None:
        pass

    def mark(self, resource: Resource, at: datetime, reason: str | None = None) -> None:
        pass

    def unmark(self, resource: Resource) -> None:
        pass


def _stop(ledger: DynamoLedger, instance: str, team: str | None, at: datetime, rate: float) -> None:
    finding = Finding(
        reason=Reason.GPU_IDLE,
        resource=Resource(
            kind=ResourceKind.EC2_INSTANCE,
            id=instance,
            name=instance,
            account="123456789012",
            region="us-east-1",
            tags={"team": team} if team else {},
        ),
        summary="idle",
        observed_at=at,
        hourly_usd=rate,
    )
    decision = Decision(
        action=Action.STOP, reason=Reason.GPU_IDLE, finding=finding, dry_run=False, decided_at=at
    )
    execute(decision, _Stops(), ledger=ledger)  # type: ignore[arg-type]


def _weekly(messages: list[dict[str, Any]]) -> dict[str, list[str]]:
    by_channel: dict[str, list[str]] = {}
    for m in messages:
        text = str(m)
        if "What costguard saved this week" in text:
            by_channel.setdefault(m["channel"], []).append(text)
    return by_channel


def test_a_monday_posts_one_report_per_team_channel_and_the_days_line_once(
    world: World, sink: SlackSink, sleeps: list[float]
) -> None:
    routes = {"vision": sink.url_for("vision"), "nlp": sink.url_for("nlp")}
    with LocalStack(world, sink=sink, routes=routes) as stack:
        ledger = DynamoLedger(TABLE)
        _stop(ledger, "i-0aaa", "vision", LAST_WEEK + 10 * H, 10.0)  # off since: 158 h by the report
        _stop(ledger, "i-0bbb", "vision", LAST_WEEK + 30 * H, 2.0)
        _stop(ledger, "i-0ccc", "nlp", LAST_WEEK + 50 * H, 4.0)
        _stop(ledger, "i-0ddd", None, LAST_WEEK + 100 * H, 1.0)  # no team: the default channel
        _stop(ledger, "i-0eee", "vision", LAST_WEEK - 2 * H, 9.0)  # the week before: not in this report
        [first] = replay(stack, [MONDAY])
        assert first.ok, first.error
        stack.drain()
        weekly = _weekly(stack.sink.messages)
        assert sorted(weekly) == ["local", "nlp", "vision"]
        assert all(len(texts) == 1 for texts in weekly.values())  # one message per team channel
        assert "Team vision" in weekly["vision"][0] and "i-0aaa" in weekly["vision"][0]
        assert "i-0eee" not in weekly["vision"][0] and "i-0ccc" not in weekly["vision"][0]
        # vision: i-0aaa off 158 h x $10 and i-0bbb 138 h x $2 = $1,856.00, as ledger.Entry prices them.
        assert "$1,856.00" in weekly["vision"][0]
        assert "Team nlp" in weekly["nlp"][0] and "$472.00" in weekly["nlp"][0]  # 118 h x $4
        assert "Team (no team)" in weekly["local"][0]
        lines = [m for m in stack.sink.messages if "What costguard saved yesterday" in str(m)]
        assert [m["channel"] for m in lines] == ["local"]  # the default route
        told = len(stack.sink.messages)
        # EventBridge may deliver a schedule twice: the reports are the same episodes, told once.
        [again] = replay(stack, [MONDAY])
        assert again.ok, again.error
        stack.drain()
        assert len(stack.sink.messages) == told


def test_the_schedule_is_routed_to_the_ledger_report_as_the_deployed_rule_routes_it(
    stack: LocalStack,
) -> None:
    [result] = replay(stack, [MONDAY])
    assert result.ok, result.error
    assert result.function == "LedgerReportFunction" and result.route == "routed by schedule"
