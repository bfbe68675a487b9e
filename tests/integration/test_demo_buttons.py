"""Every button the demo offers works: after `costguard demo` (both modes), each element of every message costguard
posted is clicked, as a member of the ops group, through the endpoint and the worker. None is refused for its
kind, its mode or as not offered, and each one is done."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest

from costguard import clock
from costguard.aws import clients
from costguard.local.demo import run_demo
from costguard.local.interactions import (
    LOCAL_OPS_USER,
    Offered,
    block_actions,
    offered_elements,
    signed_request,
)
from costguard.local.stack import TABLE, LocalStack
from costguard.local.world import load_world
from tests.conftest import DEMO_WORLD

# Per resource, each click in the order that leaves the next one possible: a mute changes nothing on the resource;
# a stop needs it neither kept (snoozed) nor protected; a keep needs it not protected.
ORDER = {"costguard:mute": 0, "costguard:stop": 1, "costguard:keep": 2, "costguard:protect": 3}
# What a refusal says when the button should not have been there at all.
NOT_THERE = ("does not act on", "notify mode", "not a choice costguard offered", "no longer exists")


@dataclass
class Clicked:
    offered: Offered
    outcome: str
    detail: str


def _records() -> dict[str, dict[str, Any]]:
    items = clients.client("dynamodb").scan(TableName=TABLE)["Items"]
    return {i["id"]["S"]: i for i in items if i["id"]["S"].startswith("action#")}


def _click_everything(stack: LocalStack, clicked: list[Clicked]) -> None:
    # One element per resource, reason and action: the latest message that offers it (the first duration).
    chosen: dict[tuple[str, str, str], Offered] = {}
    for offered in offered_elements(stack.sink):
        reason_and_key = offered.value.split("|")[-2:]
        chosen.setdefault((offered.action_id, *reason_and_key), offered)
    at = clock.now() + timedelta(minutes=1)
    for n, offered in enumerate(sorted(chosen.values(), key=lambda o: (ORDER[o.action_id], o.value))):
        at += timedelta(seconds=2)
        clock.freeze(at)
        payload = block_actions(
            offered.action_id,
            offered.value,
            user=LOCAL_OPS_USER,
            action_ts=f"{int(at.timestamp())}.{n:06d}",
            response_url=stack.sink.response_url(f"click-{n}"),
            channel=offered.channel,
            message_ts=offered.ts,
        )
        before = set(_records())
        answer = stack.invoke(
            "InteractionsFunction", signed_request(payload, signed_at=at, request_id=f"r{n}")
        )
        assert answer.result["statusCode"] == 200, answer.result
        stack.drain("InteractionsQueue")
        [record] = [r for k, r in _records().items() if k not in before]
        clicked.append(Clicked(offered, record["status"]["S"], record.get("outcome", {}).get("S", "")))
    stack.queued(at)


@pytest.fixture(scope="module", params=["notify", "remediate"])
def clicks(request: pytest.FixtureRequest) -> Iterator[list[Clicked]]:
    clicked: list[Clicked] = []
    run_demo(load_world(DEMO_WORLD), request.param, then=lambda stack: _click_everything(stack, clicked))
    yield clicked


def test_the_demo_offers_buttons_of_every_kind(clicks: list[Clicked]) -> None:
    assert {c.offered.action_id for c in clicks} >= {"costguard:mute", "costguard:keep", "costguard:protect"}
    kinds = {c.offered.value.split("|")[-1].split("/")[2] for c in clicks}
    assert {"ec2_instance", "budget"} <= kinds, kinds  # Mute on a budget's message too


def test_no_button_offered_is_refused_for_its_kind_its_mode_or_as_not_offered(clicks: list[Clicked]) -> None:
    wrong = [
        (c.offered.action_id, c.offered.value, c.detail)
        for c in clicks
        if any(t in c.detail for t in NOT_THERE)
    ]
    assert wrong == []


def test_every_button_offered_works(clicks: list[Clicked]) -> None:
    refused = [(c.offered.action_id, c.offered.value, c.detail) for c in clicks if c.outcome != "done"]
    assert refused == []
