"""Entry point: SageMaker Training Job State Change events from EventBridge."""

from __future__ import annotations

from typing import Any

from costguard import clock
from costguard.aws import clients
from costguard.entry import ONCE_PERMISSIONS, PARSE_PERMISSIONS, OncePerEvent
from costguard.events.sagemaker import TrainingJobStateChange
from costguard.flows.training_jobs import EVENT_PERMISSIONS, handle_training_job_event
from costguard.handler import event_handler
from costguard.runtime import runtime
from costguard.settings import get_settings, require

# The IAM actions this handler's calls need: tests/template/test_iam.py holds the template to them.
PERMISSIONS = PARSE_PERMISSIONS | ONCE_PERMISSIONS | EVENT_PERMISSIONS | clients.ASSUME_PERMISSIONS

# Validated at cold start: a bad variable, or a table, queue or secret it needs unset, fails here, named.
settings = require(get_settings(), "state_table", "decisions_queue_url", "failed_events_queue_url")


def process(event: TrainingJobStateChange) -> dict[str, Any]:
    return handle_training_job_event(event, runtime(), clock.now()).summary()


# AWS may deliver one state change several times: the event id makes it one message.
lambda_handler = event_handler("training_jobs", {TrainingJobStateChange: OncePerEvent(process)})
