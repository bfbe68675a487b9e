"""job_hung's pure rules (detect/training_hang.py) and its logs adapter (aws/training_logs.py) against the real
CloudWatch Logs model (botocore's Stubber): the odd pages FilterLogEvents answers with, and errors."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from costguard.aws import clients, training_logs
from costguard.detect.training_hang import (
    BUSY_PERCENT,
    CADENCE_MULTIPLE,
    HANG_FLOOR,
    HANG_TAG,
    LINE_CHARS,
    GpusSeen,
    LogsSeen,
    Output,
    cadence,
    gpus_seen,
    hung_finding,
    judge,
    metrics_quiet,
    quoted,
    silence_after,
)
from costguard.events.sagemaker import TrainingJobDetail
from costguard.pricing import Price

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)


def job(
    tags: dict[str, str] | None = None, started: datetime | None = NOW - timedelta(hours=4)
) -> TrainingJobDetail:
    return TrainingJobDetail.model_validate(
        {
            "TrainingJobName": "pretrain",
            "TrainingJobArn": "arn:aws:sagemaker:us-east-1:123456789012:training-job/pretrain",
            "TrainingJobStatus": "InProgress",
            "TrainingStartTime": started,
            "ResourceConfig": {"InstanceType": "ml.g5.48xlarge", "InstanceCount": 2, "VolumeSizeInGB": 100},
            "Tags": tags or {},
        }
    )


def every(minutes: int, until: datetime, count: int = 30) -> tuple[datetime, ...]:
    return tuple(until - timedelta(minutes=minutes * n) for n in range(count))


# --- the silence ---------------------------------------------------------------------------------------------


def test_the_silence_is_three_of_the_jobs_own_gaps_never_under_the_floor() -> None:
    assert cadence(every(2, NOW)) == timedelta(minutes=2)
    assert silence_after(every(2, NOW)) == HANG_FLOOR  # 6 minutes: the floor
    assert silence_after(every(15, NOW)) == timedelta(minutes=15 * CADENCE_MULTIPLE)
    assert silence_after(every(60, NOW)) == timedelta(hours=3)
    assert cadence(every(5, NOW, count=2)) is None and silence_after(()) == HANG_FLOOR  # too few to learn


def test_a_jobs_metrics_are_quiet_only_past_its_silence() -> None:
    detail = job()
    last = NOW - HANG_FLOOR  # at the edge: not yet quiet
    assert not metrics_quiet(detail, Output(every(2, last), True), NOW)
    assert metrics_quiet(detail, Output(every(2, last - timedelta(seconds=1)), True), NOW)
    # A job that started less than the silence ago is never quiet, with or without metrics.
    assert not metrics_quiet(job(started=NOW - timedelta(minutes=10)), Output((), False), NOW)
    assert metrics_quiet(job(), Output((), False), NOW)


def test_a_recent_checkpoint_keeps_a_job_from_quiet() -> None:
    old = every(2, NOW - timedelta(hours=1))
    assert metrics_quiet(job(), Output(old, True), NOW)
    assert not metrics_quiet(job(), Output(old, True, checkpoint_at=NOW - timedelta(minutes=5)), NOW)


# --- the verdict ---------------------------------------------------------------------------------------------


def busy(lowest: float, silent: tuple[int, ...] = ()) -> GpusSeen:
    return GpusSeen(8, lowest, silent, 2)


QUIET = Output(every(2, NOW - timedelta(hours=2)), True)
SILENT_LOGS = LogsSeen(True, ("pretrain/algo-1-1", "pretrain/algo-2-1"))


@pytest.mark.parametrize(
    ("logs", "gpus", "verdict"),
    [
        (SILENT_LOGS, busy(99.0), "hung"),
        (SILENT_LOGS, busy(BUSY_PERCENT), "hung"),  # at the threshold: busy
        (SILENT_LOGS, busy(BUSY_PERCENT - 0.1), "not_busy"),  # job_stalled's, or a slow phase: never hung
        (LogsSeen(True, SILENT_LOGS.streams, wrote_since=True), busy(99.0), "alive"),
        (LogsSeen(False, why="AccessDeniedException"), busy(99.0), "cannot_tell"),
        (
            SILENT_LOGS,
            busy(99.0, silent=(2,)),
            "cannot_tell",
        ),  # a host with no reading may be the one working
        (SILENT_LOGS, GpusSeen(None, 99.0, (), 2), "cannot_tell"),  # GPU count unknown
        (SILENT_LOGS, None, "cannot_tell"),
    ],
)
def test_a_quiet_job_is_hung_only_with_silent_logs_and_every_gpu_busy(
    logs: LogsSeen, gpus: GpusSeen | None, verdict: str
) -> None:
    assert judge(QUIET, logs, gpus) == verdict


def test_an_unreadable_checkpoint_location_is_cannot_tell() -> None:
    unread = Output(QUIET.metric_times, True, checkpoint_read=False)
    assert judge(unread, SILENT_LOGS, busy(99.0)) == "cannot_tell"


def test_gpus_are_read_per_gpu_from_the_hosts_summed_utilization() -> None:
    at = NOW - timedelta(minutes=1)
    seen = gpus_seen({1: [(at, 792.0)], 2: [(at, 776.0), (NOW, 800.0)]}, 2, 8)
    assert seen.lowest_percent == 97.0 and seen.busy
    assert gpus_seen({1: [(at, 792.0)]}, 2, 8).silent_hosts == (2,)


# --- the finding ---------------------------------------------------------------------------------------------


def finding_for(detail: TrainingJobDetail, output: Output = QUIET) -> Any:
    logs = LogsSeen(True, SILENT_LOGS.streams, newest={"pretrain/algo-1-1": NOW - timedelta(hours=2)})
    price = Price(usd_per_hour=10.0, source="test")
    return hung_finding(
        detail, output, logs, busy(98.0), account="123456789012", region="us-east-1", price=price, now=NOW
    )


def test_the_hang_is_priced_from_the_last_output_on_every_host() -> None:
    found = finding_for(job())
    assert found.evidence["silent_since"] == max(QUIET.metric_times).isoformat()
    assert found.evidence["hang_cost_usd"] == pytest.approx(2.0 * 2 * 10.0)  # 2 h x 2 hosts x $10
    assert found.hourly_usd == 20.0
    assert found.evidence["silent_hosts"] == ["algo-1-1", "algo-2-1"]
    assert not found.remediable and f"Tag it {HANG_TAG}=true" in found.summary


def test_only_an_opted_in_job_whose_logs_and_metrics_agree_is_remediable() -> None:
    opted = job({HANG_TAG: "true"})
    assert finding_for(opted).remediable and finding_for(opted).armed_by == {HANG_TAG: "true"}
    no_metrics = finding_for(opted, Output((), False))
    assert not no_metrics.remediable and "logs alone" in no_metrics.summary


def test_quoted_log_lines_lose_their_control_characters_and_are_cut() -> None:
    lines = ["ok", "bell\x07 and\x1b[31m colour", "x" * 500, *[f"line {n}" for n in range(10)]]
    kept = quoted(lines)
    assert len(kept) == 5 and kept[-1] == "line 9"
    assert all(c.isprintable() for line in quoted(lines[:3]) for c in line)
    assert quoted(["x" * 500])[0] == "x" * LINE_CHARS + "…"


# --- the logs adapter, against the real service model -------------------------------------------------------


@pytest.fixture
def stubbed(monkeypatch: pytest.MonkeyPatch) -> Iterator[Stubber]:
    logs = boto3.client("logs", region_name="us-east-1")
    monkeypatch.setattr(clients, "client", lambda service, region=None, account=None: logs)
    with Stubber(logs) as stub:
        yield stub
        stub.assert_no_pending_responses()


STREAMS = ("pretrain/algo-1-1763600000", "pretrain/algo-2-1763600000")
SINCE = NOW - timedelta(minutes=20)


def filter_call(token: str | None = None) -> dict[str, Any]:
    expected: dict[str, Any] = {
        "logGroupName": training_logs.LOG_GROUP,
        "logStreamNames": list(STREAMS),
        "startTime": int(SINCE.timestamp() * 1000),
        "limit": 1,
    }
    return expected | ({"nextToken": token} if token else {})


def test_filter_pages_without_events_are_followed_until_one_answers(stubbed: Stubber) -> None:
    stubbed.add_response("filter_log_events", {"events": [], "nextToken": "t1"}, filter_call())
    stubbed.add_response("filter_log_events", {"events": [], "nextToken": "t2"}, filter_call("t1"))
    stubbed.add_response(
        "filter_log_events",
        {"events": [{"logStreamName": STREAMS[1], "timestamp": 1763640000000, "message": "step"}]},
        filter_call("t2"),
    )
    assert training_logs.wrote_since("us-east-1", STREAMS, SINCE) is True


def test_a_search_that_never_finishes_is_cannot_tell(stubbed: Stubber) -> None:
    token = None
    for n in range(training_logs.MAX_PAGES):
        stubbed.add_response("filter_log_events", {"events": [], "nextToken": f"t{n}"}, filter_call(token))
        token = f"t{n}"
    with pytest.raises(training_logs.LogsUnreadable, match="did not finish"):
        training_logs.wrote_since("us-east-1", STREAMS, SINCE)


def test_a_search_that_ends_without_an_event_is_silence(stubbed: Stubber) -> None:
    stubbed.add_response("filter_log_events", {"events": [], "searchedLogStreams": []}, filter_call())
    assert training_logs.wrote_since("us-east-1", STREAMS, SINCE) is False


def test_a_refused_or_missing_log_group_is_unreadable_with_its_code(stubbed: Stubber) -> None:
    stubbed.add_client_error(
        "describe_log_streams", "ResourceNotFoundException", "The specified log group does not exist."
    )
    with pytest.raises(training_logs.LogsUnreadable, match="ResourceNotFoundException"):
        training_logs.host_streams("us-east-1", "pretrain")
    stubbed.add_client_error("filter_log_events", "ThrottlingException", "Rate exceeded")
    with pytest.raises(training_logs.LogsUnreadable, match="ThrottlingException"):
        training_logs.wrote_since("us-east-1", STREAMS, SINCE)


def test_the_newest_events_of_each_host_and_the_last_lines(stubbed: Stubber) -> None:
    for stream, stamps in ((STREAMS[0], (1763604000000, 1763604120000)), (STREAMS[1], ())):
        stubbed.add_response(
            "get_log_events",
            {"events": [{"timestamp": t, "message": f"m{t}", "ingestionTime": t} for t in stamps]},
            {
                "logGroupName": training_logs.LOG_GROUP,
                "logStreamName": stream,
                "startFromHead": False,
                "limit": 5,
            },
        )
    newest = training_logs.newest_events("us-east-1", STREAMS, 5)
    assert newest.at == {STREAMS[0]: datetime.fromtimestamp(1763604120, UTC), STREAMS[1]: None}
    assert newest.lines == ("m1763604000000", "m1763604120000")


def test_hostile_log_lines_cannot_ping_or_link_in_the_message() -> None:
    """A job's log lines are anyone's text: quoted in the message, they neither ping a channel nor forge a link."""
    from costguard.act.executor import Outcome
    from costguard.model import Action, Decision
    from costguard.notify.message import build_message
    from costguard.notify.notice import Notice

    hostile = ["<!channel> NCCL timeout", "see <https://evil.example|the fix>", "\u202eevil"]
    logs = LogsSeen(True, SILENT_LOGS.streams, last_lines=quoted(hostile))
    price = Price(usd_per_hour=10.0, source="test")
    found = hung_finding(
        job(), QUIET, logs, busy(98.0), account="123456789012", region="us-east-1", price=price, now=NOW
    )
    decision = Decision(
        action=Action.NOTIFY, reason=found.reason, finding=found, dry_run=True, decided_at=NOW
    )
    text = str(build_message(Notice(decision=decision, outcome=Outcome(done=False, detail="told"))))
    assert "NCCL timeout" in text and "&lt;!channel&gt;" in text
    assert "<!channel>" not in text and "<https://evil.example" not in text and "\u202e" not in text
