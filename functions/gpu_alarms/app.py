"""Entry point: EC2 instance state changes keep one GPU-idle alarm per running GPU instance; a schedule repairs drift.
A GPU instance that starts running without the account's cost-allocation tags is told once per launch. In an
organization, a GPU instance that starts running puts its account and region in the GPU sweep's census."""

from __future__ import annotations

from typing import Any

from costguard import clock
from costguard.aws import alarms, clients
from costguard.entry import PARSE_PERMISSIONS
from costguard.events.ec2 import InstanceStateChange
from costguard.events.scheduled import ScheduledEvent
from costguard.flows.gpu import ALARMS_PERMISSIONS, handle_state_change, reconcile
from costguard.flows.launch import LAUNCH_PERMISSIONS, one_event, untagged_at_launch
from costguard.flows.org import LAUNCH_PERMISSIONS as CENSUS_PERMISSIONS
from costguard.flows.org import note_launch
from costguard.handler import event_handler
from costguard.runtime import runtime
from costguard.settings import get_settings, require

# The IAM actions this handler's calls need: tests/template/test_iam.py holds the template to them.
PERMISSIONS = (
    PARSE_PERMISSIONS
    | ALARMS_PERMISSIONS
    | LAUNCH_PERMISSIONS
    | clients.ASSUME_PERMISSIONS
    | CENSUS_PERMISSIONS
)

# Validated at cold start: a bad variable, or a table, queue or secret it needs unset, fails here, named.
# The tag check at launch tells through the common path (the repeat gate's table, the notices' queue).
_TELLS = ("state_table", "decisions_queue_url") if get_settings().required_tags else ()
settings = require(get_settings(), "failed_events_queue_url", *_TELLS)


def on_state_change(event: InstanceStateChange) -> dict[str, Any]:
    shared = one_event(runtime())  # the alarm and the tag check read the instance once
    untagged = untagged_at_launch(event, shared, clock.now())
    if event.detail.state == "running" and note_launch(
        event.account, event.region, event.detail.instance_id, shared
    ):
        untagged = untagged | {
            "census": "gpu"
        }  # an organization's GPU sweep queues its account-region from now
    if not settings.gpu_alarms:
        return _alarms_off(event) | untagged
    return handle_state_change(event, shared) | untagged


def on_schedule(event: ScheduledEvent) -> dict[str, Any]:
    if not settings.gpu_alarms:
        return _alarms_off(event)
    return {"reconcile": reconcile(runtime(), event.region)}


lambda_handler = event_handler(
    "gpu_alarms", {InstanceStateChange: on_state_change, ScheduledEvent: on_schedule}
)


def _alarms_off(model: InstanceStateChange | ScheduledEvent) -> dict[str, Any]:
    """GpuAlarms off: the 5-minute sweep alone watches GPUs. A running instance gets no alarm; whatever alarm
    is left from when they were on goes: a stopped or gone instance's at its state change, and every one under
    the prefix when a reconcile is run by hand (the hourly schedule is disabled)."""
    if isinstance(model, ScheduledEvent):
        regions = runtime().settings.regions or (model.region,)
        return {
            "reconcile": {
                region: {
                    "alarms_deleted": alarms.delete_alarms(region, sorted(alarms.alarmed_instances(region)))
                }
                for region in regions
            }
        }
    if model.detail.state == "running":
        return {"ignored": "running: GpuAlarms is off"}
    return handle_state_change(model, runtime())
