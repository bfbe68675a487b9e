"""Entry point: EC2 Spot Instance Interruption Warnings (spot_interruption)."""

from __future__ import annotations

from typing import Any

from costguard import clock
from costguard.aws import clients
from costguard.entry import ONCE_PERMISSIONS, PARSE_PERMISSIONS, OncePerEvent
from costguard.events.ec2 import SpotInterruptionWarning
from costguard.flows.spot import EVENT_PERMISSIONS, handle_spot_interruption
from costguard.handler import event_handler
from costguard.runtime import runtime
from costguard.settings import get_settings, require

# The IAM actions this handler's calls need: tests/template/test_iam.py holds the template to them.
PERMISSIONS = PARSE_PERMISSIONS | ONCE_PERMISSIONS | EVENT_PERMISSIONS | clients.ASSUME_PERMISSIONS

# Validated at cold start: a bad variable, or a table, queue or secret it needs unset, fails here, named.
settings = require(get_settings(), "state_table", "decisions_queue_url", "failed_events_queue_url")


def process(event: SpotInterruptionWarning) -> dict[str, Any]:
    return handle_spot_interruption(event, runtime(), clock.now()).summary()


# A redelivered warning must neither alert twice nor count twice toward the workload's interruptions.
lambda_handler = event_handler("spot_interruptions", {SpotInterruptionWarning: OncePerEvent(process)})
