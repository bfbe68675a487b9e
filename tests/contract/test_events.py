"""Every sample in events/ parses into its model and is routed by the template to exactly one function."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from costguard.events.registry import model_for
from costguard.interact.verify import FunctionUrlRequest
from costguard.local.interactions import function_url_functions, is_function_url_event
from costguard.local.template import Template
from tests.conftest import EVENTS, FIXTURES, ROOT

EVENT_FILES = sorted(EVENTS.glob("*.json"))


def test_there_are_sample_events() -> None:
    assert EVENT_FILES, "events/ must hold the sample payloads"


@pytest.mark.parametrize("path", EVENT_FILES, ids=lambda p: p.name)
def test_event_parses_into_its_model(path: Path) -> None:
    event = json.loads(path.read_text())
    if is_function_url_event(event):  # a Slack interaction on the Function URL (interact/)
        assert FunctionUrlRequest.model_validate(event).id == event["requestContext"]["requestId"]
        return
    model = model_for(event)
    assert model is not None, f"{path.name}: no model for {event.get('source')} / {event.get('detail-type')}"
    parsed = model.model_validate(event)
    # An SNS delivery carries its id in the record (Records[0].Sns.MessageId), an EventBridge event on top.
    expected = event["Records"][0]["Sns"]["MessageId"] if "Records" in event else event["id"]
    assert getattr(parsed, "id", None) == expected


@pytest.mark.parametrize("path", EVENT_FILES, ids=lambda p: p.name)
def test_event_is_routed_to_one_function(path: Path) -> None:
    template, event = Template.load(ROOT / "template.yaml"), json.loads(path.read_text())
    if is_function_url_event(event):  # routed by the Function URL it is sent to, not by a rule
        assert function_url_functions(template) == ["InteractionsFunction"]
        assert not template.route(event)
        return
    routes = template.route(event)
    assert len(routes) == 1, f"{path.name} matched {[r.function for r in routes]}"


@pytest.mark.parametrize(
    ("name", "field"),
    [
        ("sagemaker-training-job-failed-bad-types.json", "InstanceCount"),
        ("sagemaker-training-job-failed-missing-name.json", "TrainingJobName"),
    ],
)
def test_broken_samples_fail_validation_naming_the_field(name: str, field: str) -> None:
    event = json.loads((FIXTURES / name).read_text())
    model = model_for(event)
    assert model is not None
    with pytest.raises(ValidationError, match=field):
        model.model_validate(event)
