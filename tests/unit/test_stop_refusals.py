"""Stops AWS refuses: stop protection (DisableApiStop) read before deciding, and refusals (stop protection, an
IAM deny) reported once per dedupe window, never crashing the run or holding other resources back.

The read itself is checked with botocore's Stubber against the real EC2 service model; the decide-then-act
path with a remediator whose answers each test chooses.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from botocore.exceptions import ClientError
from botocore.stub import Stubber

from costguard.act.aws import STOP_PROTECTION_BLOCKER, AwsRemediator, permissions_for
from costguard.act.executor import REFUSALS, execute, refusal_code
from costguard.act.limits import DynamoStopLimiter, MemoryStopLimiter
from costguard.aws import clients, inventory
from costguard.model import MARK_TAG_KEY, Action, Decision, Finding, Reason, Resource, ResourceKind
from costguard.notify.dedupe import MemoryRepeatGate
from costguard.notify.queue import MemoryNoticeQueue
from costguard.pipeline import Report, act_on
from costguard.policy import Policy

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
REGION = "us-east-1"
WINDOW = timedelta(minutes=240)  # DedupeWindowMinutes' default
SWEEP = timedelta(minutes=5)
GUARDED, DENIED, PLAIN, OTHER = (f"i-0a1f00000000000e{n}" for n in range(1, 5))


# -- the read, against the real EC2 service model ----------------------------------------------------------


@pytest.fixture
def ec2() -> Iterator[Stubber]:
    """The very client the factory hands out for the region, stubbed: no request leaves the process."""
    with Stubber(clients.ec2(REGION)) as stub:
        yield stub
        stub.assert_no_pending_responses()


def _describe(stub: Stubber, instance_id: str, protected: bool | None) -> None:
    answer: dict[str, object] = {"InstanceId": instance_id}
    if protected is not None:
        answer["DisableApiStop"] = {"Value": protected}
    stub.add_response(
        "describe_instance_attribute", answer, {"InstanceId": instance_id, "Attribute": "disableApiStop"}
    )


@pytest.mark.parametrize(("protected", "expected"), [(True, True), (False, False), (None, False)])
def test_stop_protection_is_read_with_describe_instance_attribute(
    ec2: Stubber, protected: bool | None, expected: bool
) -> None:
    _describe(ec2, GUARDED, protected)
    assert inventory.stop_protected(REGION, GUARDED) is expected


def test_the_remediator_names_stop_protection_as_the_blocker(ec2: Stubber) -> None:
    _describe(ec2, GUARDED, True)
    _describe(ec2, PLAIN, False)
    remediator = AwsRemediator()
    assert remediator.stop_blocker(_instance(GUARDED)) == STOP_PROTECTION_BLOCKER
    assert remediator.stop_blocker(_instance(PLAIN)) is None


def test_no_read_for_what_is_not_an_instance(ec2: Stubber) -> None:
    job = Resource(kind=ResourceKind.TRAINING_JOB, id="bert", account="123456789012", region=REGION)
    assert AwsRemediator().stop_blocker(job) is None  # no response queued: a call would fail


def test_the_read_is_declared_among_the_ec2_stop_permissions() -> None:
    assert {"ec2:DescribeInstanceAttribute"} == inventory.STOP_PROTECTION_PERMISSIONS
    assert "ec2:DescribeInstanceAttribute" in permissions_for(ResourceKind.EC2_INSTANCE)
    assert "ec2:DescribeInstanceAttribute" not in permissions_for(ResourceKind.TRAINING_JOB)


@pytest.mark.parametrize("code", ["OperationNotPermitted", "UnauthorizedOperation"])
def test_a_stop_ec2_refuses_is_a_known_refusal(ec2: Stubber, code: str) -> None:
    ec2.add_client_error(
        "stop_instances",
        service_error_code=code,
        service_message=f"injected {code}",
        http_status_code=403 if code == "UnauthorizedOperation" else 400,
        expected_params={"InstanceIds": [DENIED]},
    )
    limiter = MemoryStopLimiter(per_hour=1)
    outcome = execute(_stop(DENIED), AwsRemediator(), limiter)
    assert (outcome.done, outcome.refused) == (False, code)
    assert outcome.error is not None and code in outcome.error
    assert outcome.detail == f"failed to stop {DENIED}: {REFUSALS[code]}"
    assert limiter.acquire(NOW)  # the refused stop stopped nothing: its place under the hourly cap is free


def test_the_state_table_cap_gives_a_refused_stop_back(state_table: str) -> None:
    limiter = DynamoStopLimiter(state_table, per_hour=1)
    limiter.release(NOW)  # nothing taken this hour: nothing to give back, and never below zero
    assert limiter.acquire(NOW)
    assert not limiter.acquire(NOW)
    limiter.release(NOW)
    assert limiter.acquire(NOW)
    assert not limiter.acquire(NOW)
    item = clients.client("dynamodb").get_item(
        TableName=state_table, Key={"id": {"S": "stops#2026-11-20T12"}}
    )
    assert item["Item"]["stops"] == {"N": "1"}


# -- which errors are refusals -----------------------------------------------------------------------------


def _client_error(code: str, operation: str = "StopInstances") -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": f"injected {code}"}}, operation)


@pytest.mark.parametrize(
    "code", ["OperationNotPermitted", "UnauthorizedOperation", "AccessDenied", "AccessDeniedException"]
)
def test_refusals_are_recognised_by_their_code(code: str) -> None:
    assert refusal_code(_client_error(code)) == code


@pytest.mark.parametrize(
    "error",
    [
        _client_error("RequestLimitExceeded"),
        _client_error("IncorrectInstanceState"),
        _client_error("InternalError"),
        RuntimeError("UnauthorizedOperation: not a ClientError"),
    ],
)
def test_other_errors_are_not_refusals(error: Exception) -> None:
    assert refusal_code(error) is None


def test_an_error_that_is_not_a_refusal_keeps_its_hourly_cap_place() -> None:
    limiter = MemoryStopLimiter(per_hour=1)
    outcome = execute(_stop(DENIED), FakeEc2(failures={DENIED: "RequestLimitExceeded"}), limiter)
    assert outcome.error is not None and outcome.refused is None
    assert not limiter.acquire(NOW)  # it may have reached EC2: counted, on the safe side


# -- the decide-then-act path ------------------------------------------------------------------------------


class FakeEc2:
    """A remediator answering as EC2 would: stop protection on some instances, refusals on others."""

    def __init__(
        self,
        *,
        protected: set[str] | None = None,
        failures: dict[str, str] | None = None,
        unreadable: set[str] | None = None,
    ) -> None:
        self.protected = protected or set()
        self.failures = failures or {}
        self.unreadable = unreadable or set()
        self.reads: list[str] = []
        self.stops: list[str] = []  # every StopInstances call, refused or not
        self.stopped: list[str] = []

    def stop_blocker(self, resource: Resource) -> str | None:
        self.reads.append(resource.id)
        if resource.id in self.unreadable:
            raise _client_error("UnauthorizedOperation", "DescribeInstanceAttribute")
        return STOP_PROTECTION_BLOCKER if resource.id in self.protected else None

    def stop(self, resource: Resource) -> None:
        self.stops.append(resource.id)
        if resource.id in self.protected:
            raise _client_error("OperationNotPermitted")
        if resource.id in self.failures:
            raise _client_error(self.failures[resource.id])
        self.stopped.append(resource.id)

    def mark(self, resource: Resource, at: datetime, reason: str | None = None) -> None:
        pass

    def unmark(self, resource: Resource) -> None:
        pass


def _instance(instance_id: str, tags: dict[str, str] | None = None) -> Resource:
    return Resource(
        kind=ResourceKind.EC2_INSTANCE,
        id=instance_id,
        account="123456789012",
        region=REGION,
        instance_type="p4d.24xlarge",
        tags=tags or {},
    )


def _idle(instance_id: str, *, marked: bool = True, hourly_usd: float = 21.96) -> Finding:
    tags = {MARK_TAG_KEY: (NOW - timedelta(hours=1)).isoformat()} if marked else {}
    return Finding(
        reason=Reason.GPU_IDLE,
        resource=_instance(instance_id, tags),
        summary="idle",
        observed_at=NOW,
        hourly_usd=hourly_usd,
        remediable=True,
    )


def _stop(instance_id: str) -> Decision:
    finding = _idle(instance_id)
    return Decision(action=Action.STOP, reason=finding.reason, finding=finding, dry_run=False, decided_at=NOW)


class Sweeps:
    """The same findings swept every five minutes through one gate, queue and hourly cap."""

    def __init__(self, remediator: FakeEc2, *, dry_run: bool = False, max_stops: int = 5) -> None:
        self.remediator = remediator
        self.policy = Policy(dry_run=dry_run, max_stops=max_stops)
        self.gate = MemoryRepeatGate()
        self.queue = MemoryNoticeQueue()
        self.limiter = MemoryStopLimiter(per_hour=20)

    def run(self, findings: list[Finding], at: datetime = NOW) -> Report:
        return act_on(
            findings,
            policy=self.policy,
            now=at,
            remediator=self.remediator,
            queue=self.queue,
            gate=self.gate,
            repeat_window=WINDOW,
            limiter=self.limiter,
        )

    def notices_for(self, instance_id: str) -> list[str]:
        return [
            f"{n.decision.action}: {n.outcome.detail}: {n.decision.note}"
            for n in self.queue.sent
            if n.decision.resource.id == instance_id
        ]


def test_stop_protection_is_read_before_deciding_and_the_instance_is_reported_not_stopped() -> None:
    ec2 = FakeEc2(protected={GUARDED})
    sweeps = Sweeps(ec2)
    report = sweeps.run([_idle(GUARDED), _idle(OTHER, hourly_usd=5.0)])
    [guarded, other] = report.decisions
    assert guarded.action is Action.NOTIFY
    assert guarded.note == f"not stopped: {STOP_PROTECTION_BLOCKER}"
    assert guarded.resource.stop_blocker == STOP_PROTECTION_BLOCKER
    assert other.action is Action.STOP
    assert ec2.stops == [OTHER]  # no StopInstances for the protected instance
    assert ec2.stopped == [OTHER]
    assert sorted(ec2.reads) == sorted([GUARDED, OTHER])  # one read per stop candidate
    [notice] = sweeps.notices_for(GUARDED)
    assert "stop protection is on (DisableApiStop)" in notice


def test_a_protected_instance_is_reported_once_per_episode_across_sweeps() -> None:
    ec2 = FakeEc2(protected={GUARDED})
    sweeps = Sweeps(ec2)
    sweep_times = [NOW + n * SWEEP for n in range(12 * 5)]  # five hours of five-minute sweeps
    for at in sweep_times:
        sweeps.run([_idle(GUARDED)], at)
    assert ec2.stops == []
    assert len(ec2.reads) == len(sweep_times)  # read again at each sweep: it may have been turned off
    assert len(sweeps.notices_for(GUARDED)) == 1  # 12:00: seen at every sweep since, the same episode


def test_only_stop_candidates_are_read() -> None:
    ec2 = FakeEc2(protected={GUARDED})
    fresh = _idle(PLAIN, marked=False)  # marked now: a stop comes only after the grace period
    not_remediable = _idle(OTHER).model_copy(update={"remediable": False})
    report = Sweeps(ec2).run([fresh, not_remediable])
    assert [d.action for d in report.decisions] == [Action.MARK, Action.NOTIFY]
    assert ec2.reads == []


def test_a_protected_candidate_leaves_its_place_under_the_per_run_cap_to_the_next() -> None:
    ec2 = FakeEc2(protected={GUARDED})
    findings = [_idle(GUARDED, hourly_usd=98.0), _idle(PLAIN, hourly_usd=21.96), _idle(OTHER, hourly_usd=5.0)]
    report = Sweeps(ec2, max_stops=1).run(findings)
    assert [d.action for d in report.decisions] == [Action.NOTIFY, Action.STOP, Action.NOTIFY]
    assert "stop cap of 1 per run reached" in report.decisions[2].note
    assert ec2.stopped == [PLAIN]
    assert ec2.reads == [GUARDED, PLAIN]  # costliest first, and none beyond the cap


def test_notify_mode_makes_the_same_read_and_the_same_decisions() -> None:
    findings = [_idle(GUARDED), _idle(OTHER, hourly_usd=5.0)]
    live_ec2, dry_ec2 = FakeEc2(protected={GUARDED}), FakeEc2(protected={GUARDED})
    live = Sweeps(live_ec2).run(findings)
    dry = Sweeps(dry_ec2, dry_run=True).run(findings)
    assert dry_ec2.reads == live_ec2.reads
    assert [(d.action, d.note) for d in dry.decisions] == [(d.action, d.note) for d in live.decisions]
    assert all(d.dry_run for d in dry.decisions)
    assert dry_ec2.stops == []  # the one difference: the final API call


def test_an_unreadable_stop_protection_does_not_block_the_stop() -> None:
    # Without the read (denied, throttled), the stop is decided as before: EC2 itself refuses a protected one.
    ec2 = FakeEc2(protected={GUARDED}, unreadable={GUARDED, PLAIN})
    sweeps = Sweeps(ec2)
    report = sweeps.run([_idle(GUARDED), _idle(PLAIN, hourly_usd=5.0)])
    assert [d.action for d in report.decisions] == [Action.STOP, Action.STOP]
    assert ec2.stopped == [PLAIN]
    [refused, stopped] = report.outcomes
    assert refused.refused == "OperationNotPermitted" and "stop protection" in refused.detail
    assert stopped.done


@pytest.mark.parametrize("code", ["UnauthorizedOperation", "AccessDenied", "OperationNotPermitted"])
def test_a_refused_stop_is_reported_once_per_episode_and_others_are_still_stopped(code: str) -> None:
    ec2 = FakeEc2(failures={DENIED: code})
    sweeps = Sweeps(ec2)
    sweep_times = [NOW + n * SWEEP for n in range(12 * 9)]  # nine hours of five-minute sweeps
    for n, at in enumerate(sweep_times):
        others = [_idle(OTHER, hourly_usd=5.0)] if n == 0 else []
        report = sweeps.run([_idle(DENIED), *others], at)
        assert report.outcomes[0].refused == code  # an outcome, never an exception out of the run
    assert ec2.stops.count(DENIED) == len(sweep_times)  # tried at every sweep (its owner may lift the deny)
    assert ec2.stopped == [OTHER]  # stopped in the same run as the first refusal
    notices = sweeps.notices_for(DENIED)
    assert len(notices) == 1  # 12:00: refused again at every sweep since, the same episode
    assert all(code in n and "failed to stop" in n for n in notices)
    assert len(sweeps.notices_for(OTHER)) == 1


def test_refused_stops_do_not_use_up_the_hourly_cap() -> None:
    ec2 = FakeEc2(failures={DENIED: "UnauthorizedOperation"})
    sweeps = Sweeps(ec2)
    sweeps.limiter = MemoryStopLimiter(per_hour=2)
    for n in range(11):  # eleven refusals within the hour
        sweeps.run([_idle(DENIED)], NOW + n * SWEEP)
    sweeps.run([_idle(OTHER)], NOW + 55 * timedelta(minutes=1))
    assert ec2.stopped == [OTHER]


def test_a_stop_that_succeeds_after_a_refusal_is_reported_inside_the_window() -> None:
    ec2 = FakeEc2(failures={DENIED: "UnauthorizedOperation"})
    sweeps = Sweeps(ec2)
    sweeps.run([_idle(DENIED)], NOW)
    sweeps.run([_idle(DENIED)], NOW + SWEEP)
    del ec2.failures[DENIED]  # the deny is lifted
    sweeps.run([_idle(DENIED)], NOW + 2 * SWEEP)
    notices = sweeps.notices_for(DENIED)
    assert len(notices) == 2
    assert notices[-1].startswith(f"stop: stopped {DENIED}")


def test_a_different_refusal_of_the_same_resource_is_news() -> None:
    ec2 = FakeEc2(failures={DENIED: "UnauthorizedOperation"})
    sweeps = Sweeps(ec2)
    sweeps.run([_idle(DENIED)], NOW)
    ec2.failures[DENIED] = "OperationNotPermitted"  # the deny is lifted, but stop protection was turned on
    sweeps.run([_idle(DENIED)], NOW + SWEEP)
    sweeps.run([_idle(DENIED)], NOW + 2 * SWEEP)
    assert len(sweeps.notices_for(DENIED)) == 2


def test_other_failures_are_still_reported_every_time() -> None:
    ec2 = FakeEc2(failures={DENIED: "InternalError"})
    sweeps = Sweeps(ec2)
    for n in range(3):
        sweeps.run([_idle(DENIED)], NOW + n * SWEEP)
    assert len(sweeps.notices_for(DENIED)) == 3


def test_a_remediator_that_cannot_read_blockers_decides_as_before() -> None:
    class StopsOnly:
        def __init__(self) -> None:
            self.stopped: list[str] = []

        def stop(self, resource: Resource) -> None:
            self.stopped.append(resource.id)

        def mark(self, resource: Resource, at: datetime, reason: str | None = None) -> None:
            pass

        def unmark(self, resource: Resource) -> None:
            pass

    remediator = StopsOnly()
    report = act_on(
        [_idle(GUARDED)],
        policy=Policy(dry_run=False),
        now=NOW,
        remediator=remediator,
        queue=MemoryNoticeQueue(),
        gate=MemoryRepeatGate(),
        repeat_window=WINDOW,
    )
    assert [d.action for d in report.decisions] == [Action.STOP]
    assert remediator.stopped == [GUARDED]
