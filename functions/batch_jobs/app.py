"""Entry point: AWS Batch Job State Change events from EventBridge (batch_retry_loop)."""

from __future__ import annotations

from typing import Any

from costguard import clock
from costguard.entry import ONCE_PERMISSIONS, PARSE_PERMISSIONS, OncePerEvent
from costguard.events.batch import BatchJobStateChange
from costguard.flows.batch import EVENT_PERMISSIONS, handle_batch_job_event
from costguard.handler import event_handler
from costguard.runtime import runtime
from costguard.settings import get_settings, require

# The IAM actions this handler's calls need: tests/template/test_iam.py holds the template to them.
PERMISSIONS = PARSE_PERMISSIONS | ONCE_PERMISSIONS | EVENT_PERMISSIONS

# Validated at cold start: a bad variable, or a table, queue or secret it needs unset, fails here, named.
settings = require(get_settings(), "state_table", "decisions_queue_url", "failed_events_queue_url")


def process(event: BatchJobStateChange) -> dict[str, Any]:
    return handle_batch_job_event(event, runtime(), clock.now()).summary()


# A redelivered event must neither alert twice nor count its job twice against the queue.
lambda_handler = event_handler("batch_jobs", {BatchJobStateChange: OncePerEvent(process)})
