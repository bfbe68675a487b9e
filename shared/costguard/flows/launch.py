"""The alert at launch: a GPU or accelerator instance started without the account's cost-allocation tags.

EC2's ``running`` state change names the instance only: one DescribeInstances (and a DescribeInstanceTypes the
first time the process sees its type) reads its type, tags and launch time. GpuAlarms reads the same instance for
its alarm: ``one_event`` lets the two share that one read. Nothing is read when no tag is required
(``COSTGUARD_REQUIRED_TAGS`` empty, the default).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from costguard.aws import inventory
from costguard.detect.gpu import instance_resource
from costguard.detect.tagging import untagged_launch_finding
from costguard.events.ec2 import InstanceStateChange
from costguard.model import Ec2Instance
from costguard.observability import tracer
from costguard.reads import Inventory
from costguard.runtime import PRICES_PERMISSIONS, REPORT_PERMISSIONS, Runtime

# untagged_at_launch: the instance (DescribeInstances, DescribeInstanceTypes), its price, and the notice.
# untagged_gpu_spend only reports: nothing a launch tells is marked, stopped or armed by a tag.
LAUNCH_PERMISSIONS = inventory.PERMISSIONS | REPORT_PERMISSIONS | PRICES_PERMISSIONS


@dataclass
class RememberedInventory:
    """One event's inventory reads, each asked of AWS once however many flows ask."""

    inner: Inventory
    _answers: dict[tuple[Any, ...], Any] = field(default_factory=dict)

    def describe_gpu_instances(
        self, region: str, *, instance_ids: Sequence[str] | None = None
    ) -> list[Ec2Instance]:
        key = ("gpu", region, tuple(instance_ids) if instance_ids is not None else None)
        if key not in self._answers:
            self._answers[key] = self.inner.describe_gpu_instances(region, instance_ids=instance_ids)
        found: list[Ec2Instance] = self._answers[key]
        return found

    def describe_instance(self, region: str, instance_id: str) -> Ec2Instance | None:
        key = ("one", region, instance_id)
        if key not in self._answers:
            self._answers[key] = self.inner.describe_instance(region, instance_id)
        found: Ec2Instance | None = self._answers[key]
        return found


def one_event(runtime: Runtime) -> Runtime:
    """The runtime for one event: its inventory reads shared by every flow the event goes through."""
    return replace(
        runtime, reads=replace(runtime.reads, inventory=RememberedInventory(runtime.reads.inventory))
    )


@tracer.capture_method
def untagged_at_launch(event: InstanceStateChange, runtime: Runtime, now: datetime) -> dict[str, Any]:
    """A ``running`` GPU or accelerator instance lacking a required tag: one notify-only ``untagged_gpu_spend``
    per launch (its launch time scopes the repeat gate). The report's summary; {} when nothing was checked."""
    required = runtime.settings.required_tags
    if event.detail.state != "running" or not required:
        return {}
    found = runtime.reads.inventory.describe_gpu_instances(
        event.region, instance_ids=[event.detail.instance_id]
    )
    findings = []
    for instance in found:
        price = runtime.prices.hourly(instance.type, event.region)
        finding = untagged_launch_finding(
            instance_resource(instance),
            required=required,
            accelerators=instance.accelerators,
            launched_at=instance.launch_time,
            hourly_usd=price.usd_per_hour if price else None,
            observed_at=event.time,
            event_id=event.id,
        )
        if finding is not None:
            findings.append(finding)
    return runtime.act(findings, now).summary()
