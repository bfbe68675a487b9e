"""costguard's EventBridge envelope (events/envelope.py) answers as powertools' EventBridgeModel does."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from aws_lambda_powertools.utilities.parser.models import EventBridgeModel as PowertoolsModel
from pydantic import ValidationError

from costguard.events.envelope import EventBridgeModel
from tests.conftest import EVENTS, ROOT

SAMPLES = ROOT.parent / "shared" / "aws-samples"


def _eventbridge(paths: list[Path]) -> list[Path]:
    found = []
    for path in paths:
        try:
            event = json.loads(path.read_text())
        except ValueError:
            continue  # a commented sample (.jsonc) or notes
        if isinstance(event, dict) and "detail-type" in event:
            found.append(path)
    return found


EVENTBRIDGE_FILES = _eventbridge(sorted(EVENTS.glob("*.json")) + sorted(SAMPLES.glob("*.json")))


def _answer(model: type[Any], event: Any) -> Any:
    try:
        return model.model_validate(event).model_dump(by_alias=True)
    except ValidationError as error:
        return sorted((e["loc"], e["type"]) for e in error.errors())


def test_there_are_eventbridge_samples() -> None:
    assert len(EVENTBRIDGE_FILES) >= 20


@pytest.mark.parametrize("path", EVENTBRIDGE_FILES, ids=lambda p: p.name)
def test_every_shipped_and_real_event_gets_the_same_envelope(path: Path) -> None:
    event = json.loads(path.read_text())
    assert _answer(EventBridgeModel, event) == _answer(PowertoolsModel, event)


def _variants(event: dict[str, Any]) -> list[dict[str, Any]]:
    """Broken and odd spellings of one event: each field missing or of the wrong type, a scheduler's "{}"."""
    out = []
    for field in event:
        missing = copy.deepcopy(event)
        del missing[field]
        wrong = copy.deepcopy(event)
        wrong[field] = [1, 2]
        out += [missing, wrong]
    scheduler = copy.deepcopy(event) | {"source": "aws.scheduler", "detail": "{}"}
    other_text = copy.deepcopy(event) | {"detail": "{}"}
    named = copy.deepcopy(event) | {"replay-name": "replay-1", "time": 1764547200}
    return [*out, scheduler, other_text, named]


def test_broken_and_odd_envelopes_get_the_same_answer() -> None:
    event = json.loads((EVENTS / "ec2-instance-running-untagged.json").read_text())
    for variant in _variants(event):
        assert _answer(EventBridgeModel, variant) == _answer(PowertoolsModel, variant), variant
