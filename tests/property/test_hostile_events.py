"""Every handler meets mutated real events: nothing escapes unhandled, every rejection is logged, counted, kept."""

from __future__ import annotations

import contextlib
import io
import json
import uuid
from typing import Any

import pytest
from aws_lambda_powertools.utilities.batch.exceptions import BatchProcessingError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from costguard.entry import event_id
from costguard.local.stack import DEFAULT_TEMPLATE, LambdaContext, LocalStack
from costguard.local.template import Template
from tests.conftest import EVENTS, ROOT, json_lines
from tests.property.mutations import hostile_events, json_values

pytestmark = [
    pytest.mark.filterwarnings("ignore:No application metrics to publish"),
    pytest.mark.filterwarnings("ignore::hypothesis.errors.HypothesisWarning"),  # huge examples, by design
]

# Fixed and derandomized: the same examples on every run, so a failure reproduces and the suite stays quick.
EXAMPLES = 40
FIGURES = ROOT / "build" / "property-figures.json"
_EXAMPLE_SETTINGS = settings(
    max_examples=EXAMPLES,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)

TEMPLATE = Template.load(DEFAULT_TEMPLATE)
FUNCTIONS = TEMPLATE.functions()


def _events_routed_to() -> dict[str, list[dict[str, Any]]]:
    """The events/ files each function receives, found through the template's own rules and schedules."""
    routed: dict[str, list[dict[str, Any]]] = {}
    for path in sorted(EVENTS.glob("*.json")):
        event = json.loads(path.read_text(encoding="utf-8"))
        for route in TEMPLATE.route(event):
            routed.setdefault(route.function, []).append(event)
    return routed


ROUTED = _events_routed_to()
EVENT_DRIVEN = sorted(ROUTED)
QUEUE_DRIVEN = sorted(
    f.logical_id for f in FUNCTIONS.values() if any(r.source_type == "SQS" for r in f.routes)
)


def test_every_function_on_disk_is_covered() -> None:
    """A new functions/<name>/app.py is fuzzed as soon as the template routes an event file or a queue to it.

    Functions with no event source of their own (state machine tasks) are invoked by costguard, not by events.
    """
    on_disk = {p.parent.resolve() for p in (ROOT / "functions").glob("*/app.py")}
    deployed = [f for f in FUNCTIONS.values() if f.module_path.parent.resolve() in on_disk and f.routes]
    assert deployed, "no function found"
    covered = set(EVENT_DRIVEN) | set(QUEUE_DRIVEN)
    missing = sorted(f.logical_id for f in deployed if f.logical_id not in covered)
    assert not missing, f"no event file in events/ reaches {missing}"


def _record_figures(function: str, figures: dict[str, Any]) -> None:
    FIGURES.parent.mkdir(exist_ok=True)
    try:
        known = json.loads(FIGURES.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        known = {}
    known.setdefault("examples_per_handler", EXAMPLES)
    known.setdefault("handlers", {})[function] = figures
    FIGURES.write_text(json.dumps(known, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def _metric_values(stdout: str, name: str) -> list[float]:
    """Values of one metric in the Embedded Metric Format lines powertools printed."""
    values = []
    for line in json_lines(stdout):
        declared = {
            m["Name"] for d in line.get("_aws", {}).get("CloudWatchMetrics", []) for m in d["Metrics"]
        }
        if name in declared:
            value = line[name]
            values.extend(value if isinstance(value, list) else [value])
    return values


def _take_all(stack: LocalStack, queue: str) -> list[str]:
    from costguard.aws import clients

    sqs = clients.sqs()
    bodies = []
    while messages := sqs.receive_message(
        QueueUrl=stack.urls[queue], MaxNumberOfMessages=10, VisibilityTimeout=30
    ).get("Messages", []):
        bodies.extend(m["Body"] for m in messages)
        sqs.delete_message_batch(
            QueueUrl=stack.urls[queue],
            Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(messages)],
        )
    return bodies


@st.composite
def _fresh_ids(draw: st.DrawFn, originals: list[dict[str, Any]]) -> Any:
    """A mutated event with a new event id: an id already seen would only replay the stored outcome."""
    fresh = [{**event, "id": str(draw(st.uuids()))} for event in originals]
    return draw(hostile_events(fresh))


@pytest.mark.parametrize("function", EVENT_DRIVEN)
def test_handler_survives_hostile_events(function: str, stack: LocalStack) -> None:
    figures = {"examples": 0, "rejected": 0, "processed": 0, "source_events": len(ROUTED[function])}

    @_EXAMPLE_SETTINGS
    @given(event=_fresh_ids(ROUTED[function]))
    def survives(event: Any) -> None:
        logs = io.StringIO()
        with contextlib.redirect_stderr(logs):
            invocation = stack.invoke(function, event)  # an exception here fails the property
        result = invocation.result
        figures["examples"] += 1
        assert isinstance(result, dict), f"{function} answered {result!r}"
        kept = _take_all(stack, "FailedEventsQueue")
        if not result.get("rejected"):
            figures["processed"] += 1
            assert kept == [], "an accepted event was also filed as failed"
            return
        figures["rejected"] += 1
        eid = event_id(event)
        assert result["event_id"] == eid
        logged = [
            line
            for line in json_lines(logs.getvalue())
            if line.get("message") == "rejected malformed event" and line.get("event_id") == eid
        ]
        assert len(logged) == 1, f"rejection of {eid} not logged with its id"
        assert _metric_values(invocation.output, "RejectedEvents") == [1.0]
        # Kept whole, or (too big for SQS) as its JSON text cut to fit: readable either way.
        assert len(kept) == 1
        filed = json.loads(kept[0])
        assert (filed["function"], filed["event_id"]) == (FUNCTIONS[function].code_uri.name, eid)
        assert "event" in filed
        if filed.get("event_truncated"):
            figures["kept_truncated"] = figures.get("kept_truncated", 0) + 1

    survives()
    assert figures["examples"] > 0
    assert figures["rejected"] > 0  # the strategy does break events, so the rejection path ran
    _record_figures(function, figures)


# What a queue consumer logs (with the message id) and counts for a record it returns to the queue. The
# interactions worker tells a click it cannot verify as Slack's apart from one it cannot read (docs/operating.md).
FAILURE_LOGS = (
    "unreadable notice",
    "Slack delivery failed",
    "unverified interaction: not signed by Slack",
    "unreadable interaction",
    "interaction failed",
    "unreadable work item",
)
FAILURE_METRICS = (
    "UnreadableNotices",
    "DeliveryFailures",
    "UnverifiedInteractions",
    "UnreadableInteractions",
    "InteractionFailures",
    "UnreadableWorkItems",
)


@pytest.mark.parametrize("function", QUEUE_DRIVEN)
def test_queue_consumer_survives_hostile_notices(function: str, stack: LocalStack) -> None:
    """Queued notices, mutated: each record is delivered or reported back to SQS (kept), never lost or fatal."""
    failed_job = json.loads((EVENTS / "sagemaker-training-job-failed.json").read_text())
    # A job of its own for each consumer: the module's stack already told the sample's failure (one episode).
    failed_job["id"] = str(uuid.uuid5(uuid.NAMESPACE_URL, function))
    failed_job["detail"]["TrainingJobName"] += f"-{function.lower()[:20]}"
    stack.invoke("TrainingJobsFunction", failed_job)
    originals = [json.loads(body) for body in _take_all(stack, "DecisionsQueue")]
    assert originals, "no notice to start from"
    figures = {"examples": 0, "records": 0, "reported_failed": 0, "delivered": 0}
    queue_arn = f"arn:aws:sqs:{stack.world.region}:{stack.world.account}:costguard-decisions"

    bodies = st.one_of(
        hostile_events(originals).map(lambda notice: json.dumps(notice, default=str)),
        json_values.map(json.dumps),
        st.text(max_size=200),
    )

    @_EXAMPLE_SETTINGS
    @given(records=st.lists(bodies, min_size=1, max_size=4))
    def survives(records: list[str]) -> None:
        ids = [str(uuid.uuid4()) for _ in records]
        event = {
            "Records": [
                {
                    "messageId": mid,
                    "receiptHandle": f"handle-{mid}",
                    "body": body,
                    "attributes": {"ApproximateReceiveCount": "1"},
                    "messageAttributes": {},
                    "md5OfBody": "0" * 32,
                    "eventSource": "aws:sqs",
                    "eventSourceARN": queue_arn,
                    "awsRegion": stack.world.region,
                }
                for mid, body in zip(ids, records, strict=True)
            ]
        }
        logs, stdout = io.StringIO(), io.StringIO()
        before = len(stack.sink.messages)
        handler = getattr(stack.module(FUNCTIONS[function]), FUNCTIONS[function].handler_name)
        with contextlib.redirect_stderr(logs), contextlib.redirect_stdout(stdout):
            try:
                result = handler(event, LambdaContext(function_name=function))
            except BatchProcessingError:
                # Every record failed: Lambda returns the whole batch to the queue, the same as reporting each.
                result = {"batchItemFailures": [{"itemIdentifier": mid} for mid in ids]}
                figures["whole_batch_failed"] = figures.get("whole_batch_failed", 0) + 1
        failed = {f["itemIdentifier"] for f in result["batchItemFailures"]}
        figures["examples"] += 1
        figures["records"] += len(ids)
        figures["reported_failed"] += len(failed)
        figures["delivered"] += len(ids) - len(failed)
        assert failed <= set(ids)
        # A record reported failed stays on the queue (then its dead-letter queue): it is logged by id and counted.
        logged = {
            line.get("message_id")
            for line in json_lines(logs.getvalue())
            if line.get("message") in FAILURE_LOGS
        }
        assert failed <= logged
        counted = [v for name in FAILURE_METRICS for v in _metric_values(stdout.getvalue(), name)]
        assert sum(counted) == len(failed)
        # Records not reported failed were posted (at most once per decision).
        assert len(stack.sink.messages) - before <= len(ids) - len(failed)

    survives()
    assert figures["reported_failed"] > 0
    if function == "NotifierFunction":
        # The interactions consumer carries out clicks only with a Slack app, which this module's stack has not
        # (its click flows: tests/integration/test_interactions_flow.py): every record fails there, kept.
        assert figures["delivered"] > 0
    _record_figures(function, figures)
