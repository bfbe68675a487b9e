"""Entry point: the scheduled sweep over the GPU pods and GPU nodes of every EKS cluster in the region."""

from __future__ import annotations

from typing import Any

from costguard import clock
from costguard.entry import PARSE_PERMISSIONS
from costguard.events.scheduled import ScheduledEvent
from costguard.flows.eks import PERMISSIONS as SWEEP_PERMISSIONS
from costguard.flows.eks import handle_sweep
from costguard.handler import event_handler
from costguard.runtime import runtime
from costguard.settings import get_settings, require

# The IAM actions this handler's calls need: tests/template/test_iam.py holds the template to them.
PERMISSIONS = PARSE_PERMISSIONS | SWEEP_PERMISSIONS

# Validated at cold start: a bad variable, or a table, queue or secret it needs unset, fails here, named.
settings = require(get_settings(), "state_table", "decisions_queue_url", "failed_events_queue_url")


def on_schedule(event: ScheduledEvent) -> dict[str, Any]:
    return handle_sweep(runtime(), clock.now(), event.region, event.id).summary()


lambda_handler = event_handler("eks_gpu", {ScheduledEvent: on_schedule})
