"""The adaptive policy's fleet priors: a new instance borrows from its peers from its first idle period, its own
record outweighs them as it grows, a pool stays a few KB, and a time-zone tag places the hours in the owner's day."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from costguard.detect.adaptive import (
    NO_HISTORY,
    Action,
    IdleHistory,
    Shape,
    Status,
    advise,
    hour_of_week,
    zone_of,
)
from costguard.detect.idle_priors import Pool, peer_groups, pooled, prior_for
from tests.unit.test_adaptive import START, P, feed


def peers_pool(instances: int = 3, days: int = 7) -> dict[str, Pool]:
    """Trainers of one team: nine-hour jobs, then six hours idle (GPU and CPU down), pooled."""
    pools: dict[str, Pool] = {}
    groups = peer_groups("ec2", "g5.2xlarge", {"team": "research"})
    for n in range(instances):
        history, at = IdleHistory(), START + timedelta(hours=n)
        while at < START + timedelta(days=days):
            at = feed(history, at, Status.BUSY, 9 * 60, 80)
            at = feed(history, at, Status.IDLE, 6 * 60, 2)
        pooled({"peer": history.take_recorded()}, {"peer": groups}, pools)
    return pools


def test_peer_groups_most_specific_first() -> None:
    assert peer_groups("ec2", "g5.2xlarge", {"team": "research"}) == [
        "ec2/team=research/g5",
        "ec2/team=research",
        "ec2/g5",
        "ec2",
    ]
    assert peer_groups("notebook", "ml.g5.xlarge", {}) == ["notebook/g5", "notebook"]


def test_a_new_instance_in_a_fleet_with_history_gets_adapted_decisions_from_its_first_idle_period() -> None:
    pools = peers_pool()
    # A new instance of the same team and family (another size): never idle before, its first job just ended.
    prior = prior_for(peer_groups("ec2", "g5.12xlarge", {"team": "research"}), pools)
    assert prior is not None
    new, at = IdleHistory(), START + timedelta(days=8)
    at = feed(new, at, Status.BUSY, 9 * 60, 80)
    at = feed(new, at, Status.IDLE, 35, 2)
    assert new.samples == 0 and new.shape(P) is Shape.AFTER_JOB
    assert advise(new, at, 5.0, P) == NO_HISTORY  # alone: the fixed window
    advice = advise(new, at, 5.0, P, prior)
    assert advice.action is Action.STOP
    assert advice.why.startswith("idle 35 min after a 9 h job ended; on instances like this one idle periods")
    # An instance of another kind has no peers here: the fixed window.
    assert prior_for(peer_groups("notebook", "ml.g5.xlarge", {}), pools) is None


def test_its_own_record_outweighs_the_fleet() -> None:
    """Peers idle for hours after a job; this one is always back within 40 minutes: never stopped early."""
    pools = peers_pool()
    prior = prior_for(peer_groups("ec2", "g5.2xlarge", {"team": "research"}), pools)
    own, at = IdleHistory(), START
    for _ in range(6):
        at = feed(own, at, Status.BUSY, 4 * 60, 80)
        at = feed(own, at, Status.IDLE, 40, 2)
    at = feed(own, at, Status.BUSY, 4 * 60, 80)
    for _ in range(8):  # 5 .. 40 minutes idle
        at = feed(own, at, Status.IDLE, 5, 2)
        assert advise(own, at, 5.0, P, prior).action is not Action.STOP


def test_the_fleet_holds_a_pause_it_knows_ends_soon() -> None:
    """Peers' lunches at noon end within 70 minutes: a new instance's first lunch is not stopped at 45."""
    pools: dict[str, Pool] = {}
    groups = peer_groups("ec2", "g5.xlarge", {"team": "analysts"})
    for n in range(4):
        history, at = IdleHistory(), START
        for day in range(5):
            noon = START + timedelta(days=day, hours=12, minutes=5 * n)
            at = feed(
                history, at, Status.IDLE, int((noon - timedelta(hours=3) - at).total_seconds() // 60), 1
            )
            at = feed(history, at, Status.BUSY, 180, 30)
            at = feed(history, at, Status.IDLE, 60 + 5 * (day % 3), 2)
            at = feed(history, at, Status.BUSY, 120, 30)
        pooled({"peer": history.take_recorded()}, {"peer": groups}, pools)
    new, at = IdleHistory(), START + timedelta(days=7, hours=9)
    at = feed(new, at, Status.BUSY, 180, 30)
    at = feed(new, at, Status.IDLE, 45, 2)
    advice = advise(new, at, 1.0, P, prior_for(groups, pools))
    assert advice.action is Action.WAIT
    assert "idle periods starting around 12:00 on instances like this one lately: 8 of 8 ended" in advice.why
    assert "a stop at 75 min idle is expected to cost less than one now" in advice.why  # every lunch is over


def test_a_pool_stays_a_few_kb_and_round_trips() -> None:
    rng = random.Random(7)
    pool = Pool()
    for _ in range(20000):  # months of a large fleet's idle periods at every hour, length and shape
        pool.add([(rng.randrange(168), rng.randrange(3), rng.randrange(37), rng.randrange(2))])
    text = pool.to_text()
    assert len(text.encode()) < 4 * 1024
    assert Pool.from_text(text).to_text() == text
    assert Pool.from_text("p9|whatever").samples == 0


def test_a_time_zone_tag_places_the_hours_in_the_owners_day() -> None:
    tokyo = zone_of({"costguard:timezone": "Asia/Tokyo"})
    assert tokyo == ZoneInfo("Asia/Tokyo")
    assert zone_of({"costguard:timezone": "Mars/Olympus"}) is UTC and zone_of({}) is UTC
    lunch = datetime(2026, 11, 3, 3, 0, tzinfo=UTC)  # Tuesday 12:00 in Tokyo
    assert hour_of_week(lunch, tokyo) == 24 + 12 and hour_of_week(lunch) == 24 + 3
    history, at = IdleHistory(zone=tokyo), lunch - timedelta(hours=2)
    at = feed(history, at, Status.BUSY, 120, 30)
    feed(history, at, Status.IDLE, 60, 2)
    history.observe(at + timedelta(minutes=65), Status.BUSY, 30, P)
    [(hour, _, _, _)] = history.take_recorded()
    assert hour == 24 + 12
