"""A training job's logs in CloudWatch Logs: ``/aws/sagemaker/TrainingJobs``, one stream per host
(``<job>/algo-N-<epoch>``). Whether any host wrote since a time, and each host's newest event with the last lines.

Which calls, and why:

- ``DescribeLogStreams`` with the job's prefix names its hosts' streams (one call a page of 50). Its
  ``lastEventTimestamp`` is not read: AWS updates it "typically in less than an hour" after ingestion, so it
  would call a hung job alive, or a live one silent, for up to an hour.
- ``FilterLogEvents`` over those streams (``logStreamNames``, at most 100 a call) from the silence's start,
  ``limit=1``: one call for all of a job's hosts, answered by any event, accurate. It may answer a page with no
  event and a ``nextToken`` (it searched part of the range): the pages are followed, at most MAX_PAGES, else the
  answer is "cannot tell".
- For a job found silent: ``GetLogEvents`` per host with ``startFromHead=false`` and a small limit, its newest
  events (accurate, one stream each), which give each host's last write and the last lines, once a sweep.

CloudWatch Logs filters one prefix or one list of streams a call: the calls are per job, and the flow makes them
only for jobs whose own metrics went quiet.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from costguard.aws import clients
from costguard.permissions import needs

LOG_GROUP = "/aws/sagemaker/TrainingJobs"
PERMISSIONS = needs("logs:DescribeLogStreams", "logs:FilterLogEvents", "logs:GetLogEvents")
MAX_PAGES = 5  # FilterLogEvents pages followed before "cannot tell"
STREAMS_PER_FILTER = 100  # FilterLogEvents' limit on logStreamNames
MAX_STREAMS = 200  # a job's hosts read at most (4 pages of DescribeLogStreams)


class LogsUnreadable(Exception):
    """The job's logs could not be read: why, for the message."""


def _ms(at: datetime) -> int:
    return int(at.timestamp() * 1000)


def _at(ms: Any) -> datetime | None:
    return datetime.fromtimestamp(int(ms) / 1000, UTC) if isinstance(ms, int | float) else None


def host_streams(region: str, job: str) -> tuple[str, ...]:
    """The job's streams (``<job>/...``), at most MAX_STREAMS; raises LogsUnreadable if they cannot be listed."""
    logs: Any = clients.client("logs", region)
    names: list[str] = []
    token: str | None = None
    try:
        while len(names) < MAX_STREAMS:
            page = logs.describe_log_streams(
                logGroupName=LOG_GROUP,
                logStreamNamePrefix=f"{job}/",
                **({"nextToken": token} if token else {}),
            )
            names += [s["logStreamName"] for s in page.get("logStreams", []) if s.get("logStreamName")]
            token = page.get("nextToken")
            if not token:
                break
    except Exception as error:  # ClientError, a throttle past the retries, a group that does not exist
        raise LogsUnreadable(f"its log streams could not be listed ({_why(error)})") from error
    return tuple(names[:MAX_STREAMS])


def wrote_since(region: str, streams: tuple[str, ...], since: datetime) -> bool:
    """Whether any of ``streams`` holds an event at or after ``since``; raises LogsUnreadable when the answer could
    not be read in MAX_PAGES pages of any batch."""
    logs: Any = clients.client("logs", region)
    for start in range(0, len(streams), STREAMS_PER_FILTER):
        batch = list(streams[start : start + STREAMS_PER_FILTER])
        token: str | None = None
        for _ in range(MAX_PAGES):
            try:
                page = logs.filter_log_events(
                    logGroupName=LOG_GROUP,
                    logStreamNames=batch,
                    startTime=_ms(since),
                    limit=1,
                    **({"nextToken": token} if token else {}),
                )
            except Exception as error:
                raise LogsUnreadable(f"its log events could not be read ({_why(error)})") from error
            if page.get("events"):
                return True
            token = page.get("nextToken")
            if not token:
                break
        else:
            raise LogsUnreadable(f"its log search did not finish in {MAX_PAGES} pages")
    return False


@dataclass(frozen=True)
class Newest:
    """Each host's newest event, and the last lines of the host that wrote last."""

    at: dict[str, datetime | None]
    lines: tuple[str, ...]


def newest_events(region: str, streams: tuple[str, ...], lines: int) -> Newest:
    """One GetLogEvents per stream, newest first (``startFromHead=false``); raises LogsUnreadable."""
    logs: Any = clients.client("logs", region)
    at: dict[str, datetime | None] = {}
    last: tuple[datetime, list[str]] | None = None
    for stream in streams:
        try:
            page = logs.get_log_events(
                logGroupName=LOG_GROUP, logStreamName=stream, startFromHead=False, limit=lines
            )
        except Exception as error:
            raise LogsUnreadable(f"{stream}'s newest events could not be read ({_why(error)})") from error
        events = [e for e in page.get("events", []) if _at(e.get("timestamp")) is not None]
        times = [t for e in events if (t := _at(e["timestamp"])) is not None]
        newest = max(times, default=None)
        at[stream] = newest
        if newest is not None and (last is None or newest > last[0]):
            ordered = sorted(events, key=lambda e: e["timestamp"])
            last = (newest, [str(e.get("message", "")) for e in ordered])
    return Newest(at, tuple(last[1]) if last else ())


def _why(error: Exception) -> str:
    code = getattr(error, "response", {}).get("Error", {}).get("Code") if hasattr(error, "response") else None
    return str(code or type(error).__name__)[:100]
