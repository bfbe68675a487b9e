"""StopTrainingJob (which moto lacks) through its adapter, against botocore's real sagemaker service model."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from botocore.stub import Stubber

from costguard.act.aws import AwsRemediator
from costguard.act.executor import execute
from costguard.aws import clients
from costguard.aws.sagemaker import TrainingJobStopper
from costguard.model import Action, Decision, Finding, Reason, Resource, ResourceKind

NOW = datetime(2026, 11, 20, 12, 20, tzinfo=UTC)
REGION = "eu-west-1"
JOB = "bert-pretrain-hung"


@pytest.fixture
def stubber() -> Iterator[Stubber]:
    """The very client the factory hands out for the region, stubbed: no request leaves the process."""
    with Stubber(clients.client("sagemaker", REGION)) as stub:
        yield stub
        stub.assert_no_pending_responses()


def _job() -> Resource:
    return Resource(
        kind=ResourceKind.TRAINING_JOB,
        id=JOB,
        name=JOB,
        arn=f"arn:aws:sagemaker:{REGION}:123456789012:training-job/{JOB}",
        account="123456789012",
        region=REGION,
        instance_type="ml.p4d.24xlarge",
        instance_count=2,
    )


def _stop(dry_run: bool) -> Decision:
    finding = Finding(
        reason=Reason.JOB_STALLED, resource=_job(), summary="stalled", observed_at=NOW, remediable=True
    )
    return Decision(
        action=Action.STOP, reason=finding.reason, finding=finding, dry_run=dry_run, decided_at=NOW
    )


def test_adapter_sends_stop_training_job_with_the_job_name(stubber: Stubber) -> None:
    stubber.add_response("stop_training_job", {}, {"TrainingJobName": JOB})
    TrainingJobStopper().stop(REGION, JOB)


def test_remediator_stops_a_training_job_through_the_adapter(stubber: Stubber) -> None:
    stubber.add_response("stop_training_job", {}, {"TrainingJobName": JOB})
    outcome = execute(_stop(dry_run=False), AwsRemediator())
    assert outcome.done is True
    assert outcome.error is None
    assert outcome.detail == f"stopped {JOB}"


def test_dry_run_never_calls_stop_training_job(stubber: Stubber) -> None:
    outcome = execute(_stop(dry_run=True), AwsRemediator())  # no response queued: a call would fail
    assert outcome.done is False
    assert "would stop" in outcome.detail


def test_a_refused_stop_is_reported_in_the_outcome(stubber: Stubber) -> None:
    stubber.add_client_error(
        "stop_training_job",
        service_error_code="ResourceNotFound",
        service_message=f"Requested resource not found: {JOB}",
        http_status_code=400,
        expected_params={"TrainingJobName": JOB},
    )
    outcome = execute(_stop(dry_run=False), AwsRemediator())
    assert outcome.done is False
    assert outcome.error is not None
    assert "ResourceNotFound" in outcome.error
