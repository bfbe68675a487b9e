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


@pytest.mark.parametrize("path", sorted(EVENTS.glob("sagemaker-hyperpod-*.json")), ids=lambda p: p.name)
def test_hyperpod_samples_parse_into_their_models(path: Path) -> None:
    from costguard.events import hyperpod

    event = json.loads(path.read_text())
    model = model_for(event)
    assert model is not None
    parsed = model.model_validate(event)
    assert getattr(parsed, "id", None) == event["id"]
    if isinstance(parsed, hyperpod.ClusterStateChange):
        groups = {g.InstanceGroupName: (g.InstanceType, g.CurrentCount) for g in parsed.detail.InstanceGroups}
        assert groups["workers"] == ("ml.p5.48xlarge", 3)
    elif isinstance(parsed, hyperpod.ClusterEvent):
        assert parsed.detail.EventDetails.failure_message is not None
    else:
        assert isinstance(parsed, hyperpod.NodeHealthEvent)
        assert parsed.detail.HealthSummary.RepairAction == "Replace"


def test_the_registry_names_each_model_with_its_module_s_own_detail_types() -> None:
    from costguard.events import (
        batch,
        budgets,
        capacity,
        cloudwatch,
        ec2,
        health,
        hyperpod,
        sagemaker,
        scheduled,
    )
    from costguard.events.registry import EVENTBRIDGE_MODELS, EVENTBRIDGE_PREFIXES, model_named

    expected = {
        ("aws.sagemaker", sagemaker.TRAINING_JOB_DETAIL_TYPE): sagemaker.TrainingJobStateChange,
        ("aws.sagemaker", hyperpod.CLUSTER_STATE_DETAIL_TYPE): hyperpod.ClusterStateChange,
        ("aws.sagemaker", hyperpod.CLUSTER_EVENT_DETAIL_TYPE): hyperpod.ClusterEvent,
        ("aws.sagemaker", hyperpod.NODE_HEALTH_DETAIL_TYPE): hyperpod.NodeHealthEvent,
        ("aws.ec2", ec2.INSTANCE_STATE_DETAIL_TYPE): ec2.InstanceStateChange,
        ("aws.ec2", ec2.SPOT_INTERRUPTION_DETAIL_TYPE): ec2.SpotInterruptionWarning,
        ("aws.batch", batch.BATCH_JOB_DETAIL_TYPE): batch.BatchJobStateChange,
        ("aws.cloudwatch", cloudwatch.ALARM_DETAIL_TYPE): cloudwatch.AlarmStateChange,
        ("aws.health", health.HEALTH_DETAIL_TYPE): health.OdcrUnderutilization,
        ("aws.ce", budgets.ANOMALY_DETAIL_TYPE): budgets.AnomalyDetected,
        ("aws.events", scheduled.SCHEDULED_DETAIL_TYPE): scheduled.ScheduledEvent,
        ("aws.scheduler", scheduled.SCHEDULED_DETAIL_TYPE): scheduled.ScheduledEvent,
        **{("aws.ec2", t): capacity.ReservationStateChange for t in capacity.RESERVATION_STATE_DETAIL_TYPES},
    }
    assert {key: model_named(name) for key, name in EVENTBRIDGE_MODELS.items()} == expected
    assert [(s, p, model_named(n)) for s, p, n in EVENTBRIDGE_PREFIXES] == [
        ("aws.ec2", capacity.CAPACITY_BLOCK_PREFIX, capacity.CapacityBlockEvent)
    ]


def test_a_function_loads_only_the_event_models_it_takes() -> None:
    import subprocess
    import sys

    probe = (
        "import sys; from costguard.events.registry import model_for; import costguard.entry; "
        "import json; print(json.dumps(sorted(m for m in sys.modules if m.startswith('costguard.events.'))))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT)
    loaded = set(json.loads(out.stdout))
    assert loaded <= {"costguard.events.registry", "costguard.events.common"}
