"""The executor: the one place where a resource changes; dry runs stop just short of the call."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from costguard.act.executor import Outcome, execute
from costguard.model import Action, Decision, Finding, Reason, Resource, ResourceKind

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)


class RecordingRemediator:
    def __init__(self, error: Exception | None = None) -> None:
        self.calls: list[tuple[str, str, datetime | None]] = []
        self.error = error

    def stop(self, resource: Resource) -> None:
        self.calls.append(("stop", resource.id, None))
        if self.error:
            raise self.error

    def mark(self, resource: Resource, at: datetime, reason: str | None = None) -> None:
        self.calls.append(("mark", resource.id, at))
        if self.error:
            raise self.error


def _decision(action: Action, *, dry_run: bool) -> Decision:
    resource = Resource(
        kind=ResourceKind.EC2_INSTANCE,
        id="i-0123456789abcdef0",
        name="trainer-1",
        account="123456789012",
        region="us-east-1",
    )
    finding = Finding(
        reason=Reason.GPU_IDLE, resource=resource, summary="idle", observed_at=NOW, remediable=True
    )
    return Decision(action=action, reason=finding.reason, finding=finding, dry_run=dry_run, decided_at=NOW)


@pytest.mark.parametrize("action", [Action.STOP, Action.MARK])
def test_dry_run_never_calls_the_remediator(action: Action) -> None:
    remediator = RecordingRemediator()
    outcome = execute(_decision(action, dry_run=True), remediator)
    assert remediator.calls == []
    assert outcome.done is False
    assert outcome.error is None
    assert f"would {action.value}" in outcome.detail


def test_dry_run_stop_says_would_stop() -> None:
    outcome = execute(_decision(Action.STOP, dry_run=True), RecordingRemediator())
    assert "would stop" in outcome.detail
    assert "trainer-1" in outcome.detail


def test_live_stop_calls_stop_exactly_once() -> None:
    remediator = RecordingRemediator()
    outcome = execute(_decision(Action.STOP, dry_run=False), remediator)
    assert remediator.calls == [("stop", "i-0123456789abcdef0", None)]
    assert outcome == Outcome(done=True, detail="stopped trainer-1")


def test_live_mark_calls_mark_once_with_the_decision_time() -> None:
    remediator = RecordingRemediator()
    outcome = execute(_decision(Action.MARK, dry_run=False), remediator)
    assert remediator.calls == [("mark", "i-0123456789abcdef0", NOW)]
    assert outcome.done is True


@pytest.mark.parametrize("action", [Action.NOTIFY, Action.NONE])
@pytest.mark.parametrize("dry_run", [True, False])
def test_notify_and_none_call_nothing(action: Action, dry_run: bool) -> None:
    remediator = RecordingRemediator()
    outcome = execute(_decision(action, dry_run=dry_run), remediator)
    assert remediator.calls == []
    assert outcome.done is False
    assert outcome.error is None


@pytest.mark.parametrize("action", [Action.STOP, Action.MARK])
def test_remediator_failure_is_reported_not_raised(action: Action) -> None:
    remediator = RecordingRemediator(error=RuntimeError("UnauthorizedOperation: not allowed"))
    outcome = execute(_decision(action, dry_run=False), remediator)
    assert len(remediator.calls) == 1
    assert outcome.done is False
    assert outcome.error is not None
    assert "UnauthorizedOperation" in outcome.error
    assert f"failed to {action.value}" in outcome.detail


def test_long_error_text_is_cut() -> None:
    remediator = RecordingRemediator(error=RuntimeError("x" * 5000))
    outcome = execute(_decision(Action.STOP, dry_run=False), remediator)
    assert outcome.error is not None
    assert 0 < len(outcome.error) <= 500


class ReasonedRemediator(RecordingRemediator):
    """A remediator whose marks say why (as AwsRemediator's do for a training job)."""

    def __init__(self) -> None:
        super().__init__()
        self.reasons: list[str | None] = []

    def mark(self, resource: Resource, at: datetime, reason: str | None = None) -> None:
        self.reasons.append(reason)
        super().mark(resource, at, reason)


@pytest.mark.parametrize(
    ("reason", "said"),
    [
        (Reason.JOB_COST_CEILING, "job_cost_ceiling"),
        (Reason.TRAINING_DIVERGED, "training_diverged"),
        (Reason.JOB_STALLED, None),
    ],
)
def test_a_mark_for_something_other_than_idleness_says_why(reason: Reason, said: str | None) -> None:
    decision = _decision(Action.MARK, dry_run=False)
    decision = decision.model_copy(update={"reason": reason})
    remediator = ReasonedRemediator()
    assert execute(decision, remediator).done
    assert remediator.reasons == [said]
    assert [c[0] for c in remediator.calls] == ["mark"]
