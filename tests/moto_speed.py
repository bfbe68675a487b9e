"""moto, faster where a fleet of 1,000 instances made it slow, with the same answers.

moto's response serializer, with each member's candidate attribute names worked out once, not per value.

For every member of every value it writes, moto's serializer (moto.core.serialize) builds a context, six alias
providers and a generator to list the attribute names that member may go by in moto's model objects. Those names
depend only on the member's key and shape, the structure holding it, and the class of the object read, so they
are cached on exactly that. Each name is still tried on each object, in moto's order, and moto's response
transformers still apply: a response is what moto's own code writes (tests/unit/test_moto_speed.py compares
them), at a fraction of the cost. A sweep over 1,000 instances and a table item rewritten
a thousand times spent most of their time in this serializer.

moto's EC2 looks an instance up by id in a shallow copy of every reservation (a copy guards the callers that
narrow a reservation's instances): seeding a fleet looks up each instance it creates, so seeding 1,000 copied a
million reservations. The lookup reads the reservations in place, as it changes none of them.

moto's SQS checks each message it receives against the queue's retention period by asking for the queue's
attributes, which counts every message in the queue (three times over) to answer with one setting: a receive from
a queue of a thousand messages counted millions. The check reads the setting itself.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any
from unittest import mock

from moto.core import serialize
from moto.core.constants import MISSING
from moto.core.utils import get_value
from moto.ec2.models.instances import Instance, InstanceBackend
from moto.sqs import models as sqs_models

_original_get_value = serialize.ResponseSerializer.get_value
_original_get_instance_by_id = InstanceBackend.get_instance_by_id
_original_retained = sqs_models.SQSBackend.is_message_valid_based_on_retention_period
_names: dict[tuple[Any, ...], tuple[str, ...]] = {}


def _cacheable(obj: Any) -> bool:
    """The candidate names of an object of this class are its class's: no instance-level ``Meta`` alias table."""
    return "Meta" not in getattr(obj, "__dict__", ())


def get_member_value(self: serialize.ResponseSerializer, value: Any, key: str, shape: Any) -> Any:
    picker = self._value_picker
    if (
        type(picker) is not serialize.XFormedAttributePicker
        or picker.alias_providers is not serialize.DEFAULT_ALIAS_PROVIDERS
        or not _cacheable(value)
    ):
        return _original_get_value(self, value, key, shape)
    # The shape objects themselves (not their ids) are in the key: they stay alive, so no id is reused.
    cache_key = (key, shape, getattr(shape, "parent", None), type(value))
    names = _names.get(cache_key)
    if names is None:
        context = serialize.AttributePickerContext(
            obj=value,
            key=key,
            shape=shape,
            operation_model=self.operation_model,
            service_model=self.operation_model.service_model,
            key_path=".".join(self.path),
        )
        names = _names[cache_key] = tuple(picker.get_possible_keys(context))
    found = None
    for name in names:
        candidate = get_value(value, name, MISSING)
        if candidate is not MISSING:
            found = candidate
            break
    if picker.response_transformers:
        key_path = f"{'.'.join(self.path)}.{key}"
        for transform_path, transform in picker.response_transformers.items():
            if key_path.endswith(transform_path):
                return transform(found)
    return found


def get_instance_by_id(self: InstanceBackend, instance_id: str) -> Instance | None:
    for reservation in self.reservations.values():
        for instance in reservation.instances:
            if instance.id == instance_id:
                return instance
    return None


def is_message_retained(self: sqs_models.SQSBackend, queue_name: str, message: sqs_models.Message) -> bool:
    """moto's own test (retained until its retention period after it was sent), on the queue's setting alone."""
    period = int(self.get_queue(queue_name).message_retention_period)
    return bool(period + message.sent_timestamp / 1000 > sqs_models.unix_time())  # type: ignore[operator]


@contextlib.contextmanager
def faster_moto() -> Iterator[None]:
    """moto's serializer with the candidate names cached, and its instance lookup without copies, for as long as
    the context lasts."""
    with (
        mock.patch.object(serialize.ResponseSerializer, "get_value", get_member_value),
        mock.patch.object(InstanceBackend, "get_instance_by_id", get_instance_by_id),
        mock.patch.object(
            sqs_models.SQSBackend, "is_message_valid_based_on_retention_period", is_message_retained
        ),
    ):
        yield
