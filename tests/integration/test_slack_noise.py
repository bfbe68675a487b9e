"""No noise: an unchanged world is told once (then in one daily digest), and a fleet in one message per channel."""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from costguard.local.replay import replay
from costguard.local.sink import SlackSink
from costguard.local.stack import LocalStack
from costguard.local.world import World
from tests.conftest import EVENTS

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
SWEEP = timedelta(minutes=5)


def _sweeps(tmp_path: Path, start: datetime, count: int) -> list[str | Path]:
    """The GPU sweep's scheduled event every five minutes from ``start``, as EventBridge sends it."""
    template = json.loads((EVENTS / "schedule-gpu-sweep-1200.json").read_text())
    paths: list[str | Path] = []
    for n in range(count):
        at = start + n * SWEEP
        path = tmp_path / f"sweep-{n:04d}.json"
        event = template | {"id": f"c0ffee00-0000-4000-8000-{n:012d}", "time": f"{at:%Y-%m-%dT%H:%M:%SZ}"}
        path.write_text(json.dumps(event))
        paths.append(path)
    return paths


def _idle(n: int, team: str, lookback_minutes: int = 60) -> dict[str, object]:
    return {
        "id": f"i-{n:017x}",
        "type": "g5.xlarge" if n % 3 else "g5.12xlarge",
        "tags": {"team": team, "Name": f"{team}-idle-{n}"},
        "gpu_metrics": {"pattern": "idle", "lookback_minutes": lookback_minutes},
    }


def test_a_day_of_sweeps_over_an_unchanged_world_tells_once_then_one_digest(tmp_path: Path) -> None:
    world = World.model_validate({"now": NOW, "instances": [_idle(n, "ml") for n in range(1, 4)]})
    day = 12 * 24  # five-minute sweeps in a day
    count = day + 6  # 12:00 to 12:25 the next day
    sweeps = _sweeps(tmp_path, NOW, count)
    with SlackSink() as sink, LocalStack(world, sink=sink, until=NOW + count * SWEEP) as stack:
        results = replay(stack, sweeps)
    assert all(r.ok for r in results), [r.error for r in results if r.error][:1]
    # The world did not change: three idle GPUs. Notify mode does what remediate would: marked (in the state
    # table) at 12:00, read at every sweep of the 15-minute grace period, its stop decided at 12:15 (sweep 3)
    # and known at the next read (sweep 4); then, as remediate has stopped them, read only on the idle window's
    # slots (every sixth sweep), found idle each time.
    grace = [0, 1, 2, 3, 4]
    assert [n for n, r in enumerate(results) if r.findings] == grace + list(range(10, count, 6))
    assert all(len(r.findings) == 3 for r in results if r.findings)
    first = results[0].slack
    assert len(first) == 3  # one per idle instance: three is "a few", not grouped
    assert all("Would mark" in json.dumps(m) for m in first)  # notify mode says once what it would do
    assert all("Would stop" in json.dumps(m) for m in results[3].slack) and len(results[3].slack) == 3
    # Nothing more for a day; then one digest of what is still open, at the first read a day after they were told.
    told = [n for n, r in enumerate(results) if r.slack]
    assert told[:2] == [0, 3] and told[2:] == [n for n in range(3 + day, count) if results[n].findings][:1]
    [digest] = results[told[2]].slack
    assert "Still open after a day: Idle GPU instance: 3 EC2 instances" in json.dumps(digest)
    assert all(f"-idle-{n}" in json.dumps(digest) for n in range(1, 4))


@pytest.mark.xdist_group("slack_noise_fleet")
def test_a_sweep_with_a_thousand_idle_instances_posts_at_most_three_messages_per_channel() -> None:
    fleet = [_idle(n, "vision" if n % 2 else "nlp", lookback_minutes=40) for n in range(1000)]
    world = World.model_validate({"now": NOW, "instances": fleet})
    with SlackSink() as sink:
        routes = {"vision": sink.url_for("vision"), "nlp": sink.url_for("nlp")}
        with LocalStack(world, sink=sink, routes=routes) as stack:
            [result] = replay(stack, [EVENTS / "schedule-gpu-sweep-1200.json"])
    assert result.ok, result.error
    assert len(result.findings) == 1000
    per_channel = Counter(m["channel"] for m in result.slack)
    assert set(per_channel) == {"vision", "nlp"}
    assert max(per_channel.values()) <= 3, per_channel
    for channel in ("vision", "nlp"):
        [message] = [m for m in result.slack if m["channel"] == channel]
        text = json.dumps(message)
        assert "500 findings" in message["text"]  # every finding counted in the totals
        # The costliest first: the g5.12xlarge rows lead, and the rest are said to be in the log.
        rows = [
            b["text"]["text"]
            for b in message["blocks"]
            if b["type"] == "section" and "text" in b and b["text"]["text"].startswith("*<")
        ]
        assert len(rows) == 10 and all("g5.12xlarge" in row for row in rows)
        assert "and 450 more" in text  # 10 rows with their buttons, 40 in brief, the rest counted
