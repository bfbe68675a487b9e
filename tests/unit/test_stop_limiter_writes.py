"""The per-hour stop cap writes on change only: a stop held back by a full hour, decided again at every sweep,
costs no refused write once the hour is known full; a place given back is still found (moto)."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest

from costguard.act.limits import DynamoStopLimiter
from costguard.aws import clients

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
SWEEP = timedelta(minutes=5)


@pytest.fixture
def limiter(state_table: str) -> DynamoStopLimiter:
    return DynamoStopLimiter(state_table, per_hour=1)


def dynamodb_calls() -> Counter[str]:
    return Counter({op: n for (service, op), n in clients.calls.items() if service == "dynamodb" and n})


def test_a_full_hour_is_tried_once_per_run_and_then_only_read(limiter: DynamoStopLimiter) -> None:
    assert limiter.acquire(NOW)
    clients.calls.clear()
    assert not limiter.acquire(NOW)  # the run's second stop: the increment is refused
    assert not limiter.acquire(NOW)  # its third: known full, no call
    assert dynamodb_calls() == {"UpdateItem": 1}
    for n in range(1, 11):  # the next sweeps of the hour: a read each, never a write
        clients.calls.clear()
        assert not limiter.acquire(NOW + n * SWEEP)
        assert dynamodb_calls() == {"GetItem": 1}


def test_a_place_given_back_by_another_run_is_taken(limiter: DynamoStopLimiter) -> None:
    assert limiter.acquire(NOW)
    assert not limiter.acquire(NOW)
    DynamoStopLimiter("state", per_hour=1).release(NOW + SWEEP)  # another process's stop was refused
    clients.calls.clear()
    assert limiter.acquire(NOW + 2 * SWEEP)
    assert dynamodb_calls() == {"GetItem": 1, "UpdateItem": 1}
    assert not limiter.acquire(NOW + 3 * SWEEP)


def test_a_place_given_back_by_the_same_run_is_taken_without_a_read(limiter: DynamoStopLimiter) -> None:
    assert limiter.acquire(NOW)
    assert not limiter.acquire(NOW)
    limiter.release(NOW)
    clients.calls.clear()
    assert limiter.acquire(NOW)
    assert dynamodb_calls() == {"UpdateItem": 1}


def test_the_next_hour_starts_with_the_increment(limiter: DynamoStopLimiter) -> None:
    assert limiter.acquire(NOW)
    assert not limiter.acquire(NOW)
    clients.calls.clear()
    assert limiter.acquire(NOW + timedelta(hours=1))
    assert dynamodb_calls() == {"UpdateItem": 1}
