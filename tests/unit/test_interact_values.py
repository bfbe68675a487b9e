"""The values of costguard's Slack elements: built by the message, read back exactly by the actions."""

from __future__ import annotations

import pytest

from costguard.model import Reason, Resource, ResourceKind
from costguard.notify.values import (
    MAX_OPTION_VALUE,
    ActionId,
    action_value,
    parse_action_value,
    parse_resource_key,
)

KEY = Resource(
    kind=ResourceKind.EC2_INSTANCE, id="i-0a1f00000000000d1", account="123456789012", region="us-east-1"
).key


def test_action_ids_are_the_contract() -> None:
    assert {a.value for a in ActionId} == {
        "costguard:keep",
        "costguard:stop",
        "costguard:protect",
        "costguard:mute",
    }


def test_a_button_value_round_trips() -> None:
    value = action_value("gpu_idle", KEY)
    assert value == f"gpu_idle|{KEY}"
    parsed = parse_action_value(value, with_hours=False)
    assert (parsed.reason, parsed.resource.key, parsed.hours) == (Reason.GPU_IDLE, KEY, None)
    assert parsed.resource.kind is ResourceKind.EC2_INSTANCE and parsed.resource.id == "i-0a1f00000000000d1"


def test_a_menu_option_value_carries_its_hours() -> None:
    value = action_value("notebook_idle", "123456789012/us-east-1/notebook_instance/nb-1", hours=24)
    assert value == "24|notebook_idle|123456789012/us-east-1/notebook_instance/nb-1"
    parsed = parse_action_value(value, with_hours=True)
    assert parsed.hours == 24 and parsed.reason is Reason.NOTEBOOK_IDLE
    assert parse_action_value(action_value("gpu_idle", KEY, hours=0.5), with_hours=True).hours == 0.5


def test_an_id_keeps_everything_after_the_kind() -> None:
    assert parse_resource_key("123456789012/us-east-1/training_job/a/b").id == "a/b"


@pytest.mark.parametrize(
    ("value", "with_hours"),
    [
        ("gpu_idle", False),
        (f"nonsense|{KEY}", False),
        ("gpu_idle|123456789012/us-east-1/spaceship/x", False),
        ("gpu_idle|123456789012/us-east-1", False),
        (f"gpu_idle|{KEY}", True),
        (f"soon|gpu_idle|{KEY}", True),
        (f"0|gpu_idle|{KEY}", True),
        (f"-2|gpu_idle|{KEY}", True),
    ],
)
def test_a_value_costguard_did_not_build_is_refused(value: str, with_hours: bool) -> None:
    with pytest.raises(ValueError):
        parse_action_value(value, with_hours=with_hours)


def test_an_option_value_over_slacks_limit_is_refused_when_built() -> None:
    long_key = "123456789012/us-east-1/training_job/" + "j" * MAX_OPTION_VALUE
    with pytest.raises(ValueError, match="Slack allows 150"):
        action_value("job_stalled", long_key, hours=2)
    assert action_value("job_stalled", long_key)  # a button takes up to 2000
    with pytest.raises(ValueError):
        action_value("gpu|idle", KEY)
