"""Slack: which webhook a message goes to, and the Block Kit message itself."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from typing import Any

import pytest

from costguard.act.executor import Outcome
from costguard.detect.training_jobs import detect_failed_training_job
from costguard.events.sagemaker import TrainingJobStateChange
from costguard.model import Action, Decision, Finding, Reason, Resource, ResourceKind
from costguard.notify.message import build_message
from costguard.notify.notice import Notice
from costguard.notify.routing import SecretFormatError, SlackRoutes, parse_routes
from costguard.policy import Policy, decide
from costguard.pricing import bundled_price, bundled_table
from tests.conftest import load_event

DEFAULT_URL = "https://hooks.slack.com/services/T0000/B0000/defaultSECRETtoken"
RESEARCH_URL = "https://hooks.slack.com/services/T0000/B1111/researchSECRETtoken"
NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
SLACK_SECTION_LIMIT = 3000

# --- routing -----------------------------------------------------------------------------------------------


def test_plain_url_is_the_default_webhook() -> None:
    routes = parse_routes(f"  {DEFAULT_URL}\n")
    assert routes.default == DEFAULT_URL
    assert routes.routes == {}


def test_routing_map_is_read() -> None:
    routes = parse_routes(json.dumps({"default": DEFAULT_URL, "routes": {"ml-research": RESEARCH_URL}}))
    assert routes.default == DEFAULT_URL
    assert routes.routes == {"ml-research": RESEARCH_URL}


def test_webhook_url_key_is_the_default() -> None:
    routes = parse_routes(json.dumps({"webhook_url": DEFAULT_URL}))
    assert routes.default == DEFAULT_URL
    assert routes.routes == {}


@pytest.mark.parametrize("secret", ["", "   \n\t"])
def test_empty_secret_is_rejected(secret: str) -> None:
    with pytest.raises(SecretFormatError, match="empty"):
        parse_routes(secret)


@pytest.mark.parametrize(
    "secret",
    [
        '{"default": "' + DEFAULT_URL + '", ',  # truncated JSON
        "{'default': '" + DEFAULT_URL + "'}",  # Python, not JSON
        json.dumps({"default": DEFAULT_URL, "channel": "#alerts-defaultSECRETtoken"}),  # unknown key
        json.dumps({"routes": {"ml-research": RESEARCH_URL}}),  # no default
    ],
)
def test_malformed_secret_is_rejected_without_echoing_it(secret: str) -> None:
    with pytest.raises(SecretFormatError) as caught:
        parse_routes(secret)
    message = str(caught.value)
    assert "SECRETtoken" not in message
    assert "hooks.slack.com" not in message
    assert secret not in message
    assert caught.value.__cause__ is None


def test_text_that_is_neither_url_nor_json_is_rejected_without_echoing_it() -> None:
    with pytest.raises(SecretFormatError) as caught:
        parse_routes("xoxb-SECRETtoken")
    assert "SECRETtoken" not in str(caught.value)


def test_webhook_for_picks_by_tag_value_and_falls_back_to_default() -> None:
    routes = SlackRoutes(default=DEFAULT_URL, routes={"ml-research": RESEARCH_URL})
    assert routes.webhook_for({"team": "ml-research"}, "team") == RESEARCH_URL
    assert routes.webhook_for({"team": "platform"}, "team") == DEFAULT_URL
    assert routes.webhook_for({}, "team") == DEFAULT_URL
    assert routes.webhook_for({"team": ""}, "team") == DEFAULT_URL
    assert routes.webhook_for({"owner": "ml-research"}, "team") == DEFAULT_URL
    assert routes.webhook_for({"owner": "ml-research"}, "owner") == RESEARCH_URL


def test_routes_never_print_their_urls() -> None:
    routes = SlackRoutes(default=DEFAULT_URL, routes={"ml-research": RESEARCH_URL})
    for shown in (repr(routes), str(routes), f"{routes}", f"{routes!r}", repr([routes])):
        assert "hooks.slack.com" not in shown
        assert "SECRETtoken" not in shown
    assert "ml-research" in repr(routes)


# --- the message -------------------------------------------------------------------------------------------


def _event(failure_reason: str | None = None) -> TrainingJobStateChange:
    raw: dict[str, Any] = copy.deepcopy(load_event("sagemaker-training-job-failed.json"))
    if failure_reason is not None:
        raw["detail"]["FailureReason"] = failure_reason
    return TrainingJobStateChange.model_validate(raw)


def _training_notice(failure_reason: str | None = None) -> Notice:
    event = _event(failure_reason)
    [finding] = detect_failed_training_job(
        event.detail,
        account=event.account,
        region=event.region,
        price=bundled_price("ml.p3.2xlarge", event.region),
        observed_at=event.time,
        event_id=event.id,
    )
    decision = decide(finding, Policy(), NOW)
    return Notice(decision=decision, outcome=Outcome(done=False, detail="no change to the resource"))


def _texts(message: dict[str, Any]) -> list[str]:
    """Every piece of text in the blocks."""
    texts: list[str] = []
    for block in message["blocks"]:
        if "text" in block:
            texts.append(block["text"]["text"])
        texts.extend(field["text"] for field in block.get("fields", []))
        texts.extend(element["text"] for element in block.get("elements", []))
    return texts


def _section_texts(message: dict[str, Any]) -> list[str]:
    return [
        block["text"]["text"] for block in message["blocks"] if block["type"] == "section" and "text" in block
    ]


def test_training_job_message_has_what_a_reader_needs() -> None:
    notice = _training_notice()
    resource = notice.decision.resource
    message = build_message(notice)
    everything = "\n".join(_texts(message))

    assert message["blocks"][0]["type"] == "header"
    assert message["blocks"][0]["text"]["type"] == "plain_text"
    assert "Training job failed" in message["blocks"][0]["text"]["text"]

    assert resource.id in message["text"]
    assert "Training job failed" in message["text"]  # the finding in words; the reason code is in the blocks

    console = f"https://us-east-1.console.aws.amazon.com/sagemaker/home?region=us-east-1#/jobs/{resource.id}"
    assert f"<{console}|{resource.display_name}>" in everything

    detail = load_event("sagemaker-training-job-failed.json")["detail"]
    price = bundled_table()["sagemaker"][detail["ResourceConfig"]["InstanceType"]]
    cost = round(
        detail["BillableTimeInSeconds"] / 3600 * detail["ResourceConfig"]["InstanceCount"] * price, 2
    )
    assert f"${cost:,.2f}" == "$38.25"
    assert "$38.25" in everything

    assert "`training_job_failed`" in everything
    assert "costguard:protect=true" in everything


def test_protect_instruction_uses_the_configured_key() -> None:
    notice = _training_notice().model_copy(update={"protect_tag_key": "acme:keep"})
    everything = "\n".join(_texts(build_message(notice)))
    assert "acme:keep=true" in everything
    assert "costguard:protect=true" not in everything


def _ec2_decision(action: Action, *, dry_run: bool) -> Decision:
    resource = Resource(
        kind=ResourceKind.EC2_INSTANCE,
        id="i-0abc",
        account="123456789012",
        region="us-west-2",
        name="trainer",
    )
    finding = Finding(
        reason=Reason.GPU_IDLE,
        resource=resource,
        summary="GPU idle for 2h",
        observed_at=NOW,
        hourly_usd=21.958,
        remediable=True,
    )
    return Decision(
        action=action,
        reason=finding.reason,
        finding=finding,
        dry_run=dry_run,
        note="grace period over",
        decided_at=NOW,
    )


def test_dry_run_stop_says_would_stop() -> None:
    notice = Notice(
        decision=_ec2_decision(Action.STOP, dry_run=True),
        outcome=Outcome(done=False, detail="dry run: would stop trainer"),
    )
    sections = _section_texts(build_message(notice))
    assert any("Would stop (dry run)" in text for text in sections)
    assert not any(text.startswith(":stop_sign: Stopped") for text in sections)


def test_live_stop_says_stopped() -> None:
    notice = Notice(
        decision=_ec2_decision(Action.STOP, dry_run=False),
        outcome=Outcome(done=True, detail="stopped trainer"),
    )
    sections = _section_texts(build_message(notice))
    assert any(":stop_sign: Stopped." in text for text in sections)
    assert not any("dry run" in text for text in sections)


def test_failed_action_shows_the_error() -> None:
    notice = Notice(
        decision=_ec2_decision(Action.STOP, dry_run=False),
        outcome=Outcome(done=False, detail="failed to stop trainer", error="UnauthorizedOperation"),
    )
    sections = _section_texts(build_message(notice))
    assert any("failed to stop trainer: UnauthorizedOperation" in text for text in sections)


def test_sections_stay_under_slack_limit_with_a_huge_failure_reason() -> None:
    notice = _training_notice(failure_reason="E" * 10_000)
    message = build_message(notice)
    for text in _texts(message):
        assert len(text) <= SLACK_SECTION_LIMIT
    assert any("EEEE" in text for text in _section_texts(message))


def test_sections_stay_under_slack_limit_with_huge_summary_and_evidence() -> None:
    resource = Resource(kind=ResourceKind.TRAINING_JOB, id="job", account="123456789012", region="us-east-1")
    finding = Finding(
        reason=Reason.TRAINING_JOB_FAILED,
        resource=resource,
        summary="S" * 10_000,
        observed_at=NOW,
        evidence={"failure_reason": "E" * 10_000},
    )
    decision = Decision(
        action=Action.NOTIFY,
        reason=finding.reason,
        finding=finding,
        dry_run=True,
        note="N" * 10_000,
        decided_at=NOW,
    )
    message = build_message(Notice(decision=decision, outcome=Outcome(done=False, detail="none")))
    sections = _section_texts(message)
    assert len(sections) == 3  # summary, action, evidence
    for text in _texts(message):
        assert len(text) <= SLACK_SECTION_LIMIT
