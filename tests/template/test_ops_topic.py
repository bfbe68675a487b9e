"""The ops topic: where costguard tells its operator what Slack cannot carry (an unfilled webhook secret)."""

from __future__ import annotations

from typing import Any

import pytest

from costguard.notify.ops_topic import OPS_TOPIC_VARIABLE
from tests.template.iam import body, grants

pytestmark = pytest.mark.template

TOPIC = "OpsNotificationsTopic"
REF = {"Ref": TOPIC}


def _resources() -> dict[str, Any]:
    resources: dict[str, Any] = body()["Resources"]
    return resources


def test_the_ops_topic_is_encrypted_and_its_arn_is_an_output() -> None:
    topic = _resources()[TOPIC]
    assert topic["Type"] == "AWS::SNS::Topic"
    # The SNS-managed key: only the notifier's role publishes (no service principal, which that key refuses).
    assert topic["Properties"]["KmsMasterKeyId"] == "alias/aws/sns"
    assert body()["Outputs"]["OpsNotificationsTopicArn"]["Value"] == REF


def test_only_the_notifier_is_told_the_topic_and_may_publish_to_it_alone() -> None:
    notifier = _resources()["NotifierFunction"]["Properties"]
    assert notifier["Environment"]["Variables"][OPS_TOPIC_VARIABLE] == REF
    publish = [g for g in grants(body()) if "sns:Publish" in g.actions]
    assert publish, "no role may publish to the ops topic"
    for grant in publish:
        assert grant.role == "NotifierFunction", f"{grant.role} may publish to SNS"
        resources = grant.statement["Resource"]
        assert (resources if isinstance(resources, list) else [resources]) == [REF]
    for logical_id, resource in _resources().items():
        variables = resource.get("Properties", {}).get("Environment", {}).get("Variables", {})
        if logical_id != "NotifierFunction":
            assert OPS_TOPIC_VARIABLE not in variables, logical_id
    assert OPS_TOPIC_VARIABLE not in body()["Globals"]["Function"]["Environment"]["Variables"]
