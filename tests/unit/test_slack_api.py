"""The Slack app adapter over slack_sdk's WebClient, against the local sink playing the Web API."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from costguard.local.sink import LOCAL_BOT_TOKEN, SlackSink
from costguard.notify.delivery import Deadline, DeliveryError, PermanentDeliveryError, within
from costguard.notify.routing import parse_routes
from costguard.notify.slack_api import (
    API_URL_VARIABLE,
    USERGROUP_MAX_AGE_SECONDS,
    ApiDeliveryError,
    ApiNotStarted,
    ApiOutcomeUnknown,
    ApiPermanentError,
    SlackApi,
    api_base_url,
    api_for,
    redact_secrets,
    reset_cache,
)
from tests.integration.slack_app import playing_stalls

CHANNEL = "C0123ABCD"
USER = "U0123ABCDE"
MESSAGE = {
    "text": "GPU idle: $3.06/h",
    "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": "idle"}}],
}
SECRET_TOKEN = "xoxb-1111-2222-tokenSECRETvalue"


@pytest.fixture
def api(sink: SlackSink, sleeps: list[float]) -> SlackApi:
    return SlackApi(LOCAL_BOT_TOKEN, sink.api_url)


@pytest.fixture(autouse=True)
def _fresh_clients() -> Iterator[None]:
    reset_cache()
    yield
    reset_cache()


def test_post_returns_the_ts_and_the_sink_records_the_message(api: SlackApi, sink: SlackSink) -> None:
    ts = api.post(CHANNEL, MESSAGE)
    [posted] = sink.messages
    assert posted["ts"] == ts
    assert posted["channel"] == CHANNEL
    assert posted["method"] == "chat.postMessage"
    assert posted["text"] == MESSAGE["text"]
    assert posted["blocks"] == MESSAGE["blocks"]
    assert "thread_ts" not in posted


def test_a_reply_goes_in_the_thread(api: SlackApi, sink: SlackSink) -> None:
    parent = api.post(CHANNEL, MESSAGE)
    first = api.post(CHANNEL, {"text": "marked"}, thread_ts=parent)
    second = api.post(CHANNEL, {"text": "stopped"}, thread_ts=parent)
    assert len({parent, first, second}) == 3
    assert [m["text"] for m in sink.thread(CHANNEL, parent)] == ["marked", "stopped"]
    assert [m["ts"] for m in sink.thread(CHANNEL, parent)] == [first, second]
    assert sink.thread(CHANNEL, first) == []


def test_update_replaces_the_current_message_and_is_not_a_post(api: SlackApi, sink: SlackSink) -> None:
    ts = api.post(CHANNEL, MESSAGE)
    api.update(CHANNEL, ts, {"text": "stopped", "blocks": []})
    assert len(sink.messages) == 1  # an update is not counted as a post
    assert sink.current(CHANNEL, ts)["text"] == "stopped"
    assert sink.current(CHANNEL, ts)["blocks"] == []
    assert sink.messages[0]["text"] == MESSAGE["text"]  # what was posted stays as posted
    [update] = sink.updates
    assert (update["channel"], update["ts"], update["text"]) == (CHANNEL, ts, "stopped")


def test_an_update_of_an_unknown_message_is_permanent(api: SlackApi, sink: SlackSink) -> None:
    with pytest.raises(ApiPermanentError, match="message_not_found") as refused:
        api.update(CHANNEL, "1700000000.999999", MESSAGE)
    assert refused.value.error == "message_not_found"
    assert isinstance(refused.value, PermanentDeliveryError)
    assert sink.updates == []


def test_ephemeral_is_recorded_apart(api: SlackApi, sink: SlackSink) -> None:
    api.ephemeral(CHANNEL, USER, "only you can see this")
    assert sink.ephemerals == [{"channel": CHANNEL, "user": USER, "text": "only you can see this"}]
    assert sink.messages == []


def test_respond_posts_to_the_response_url(api: SlackApi, sink: SlackSink) -> None:
    api.respond(sink.response_url("a1"), "Stopping it now.")
    api.respond(sink.response_url("a2"), "Kept.", replace_original=True, ephemeral=False)
    assert sink.responses == [
        {
            "path": "/response/a1",
            "text": "Stopping it now.",
            "replace_original": False,
            "response_type": "ephemeral",
        },
        {"path": "/response/a2", "text": "Kept.", "replace_original": True, "response_type": "in_channel"},
    ]


@pytest.mark.parametrize(
    "url",
    [
        "https://evil.com/actions/T0/1/SECRET",
        "https://hooks.slack.com.evil.com/actions/SECRET",
        "http://hooks.slack.com/actions/T0/1/SECRET",
        "file:///etc/passwd",
    ],
)
def test_respond_refuses_a_url_that_is_not_slack_nor_the_sink(
    api: SlackApi, sink: SlackSink, url: str
) -> None:
    with pytest.raises(ApiPermanentError) as refused:
        api.respond(url, "x")
    assert "SECRET" not in str(refused.value)
    assert sink.requests == []


def test_lookup_by_email_is_cached_hits_and_misses(api: SlackApi, sink: SlackSink) -> None:
    sink.users["alice@example.com"] = USER
    assert api.user_for("alice@example.com") == USER
    assert api.user_for("Alice@Example.com ") == USER
    assert api.user_for("nobody@example.com") is None
    assert api.user_for("nobody@example.com") is None
    assert sink.lookups == ["alice@example.com", "nobody@example.com"]  # one request each


def test_a_user_id_passes_through_and_anything_else_is_none(api: SlackApi, sink: SlackSink) -> None:
    assert api.user_for(USER) == USER
    assert api.user_for("W0123ABCDE") == "W0123ABCDE"
    assert api.user_for("alice") is None
    assert api.user_for("team ml-research") is None
    assert api.user_for("") is None
    assert sink.lookups == []


def test_a_failed_lookup_is_none_and_not_cached(
    api: SlackApi, sink: SlackSink, caplog: pytest.LogCaptureFixture
) -> None:
    sink.users["alice@example.com"] = USER
    sink.always = 500
    with caplog.at_level(logging.WARNING, logger="costguard.slack_api"):
        assert api.user_for("alice@example.com") is None
    assert "user look-up failed" in caplog.text
    sink.always = None
    assert api.user_for("alice@example.com") == USER  # asked again: a failure is not a miss


def test_usergroup_members_are_cached_for_five_minutes(
    api: SlackApi, sink: SlackSink, monkeypatch: pytest.MonkeyPatch
) -> None:
    import costguard.notify.slack_api as module

    now = [1000.0]
    monkeypatch.setattr(module.time, "monotonic", lambda: now[0])
    sink.usergroups["S0123ABCD"] = [USER, "U0456EFGHI"]
    assert api.usergroup_members("S0123ABCD") == frozenset({USER, "U0456EFGHI"})
    sink.usergroups["S0123ABCD"] = [USER]
    now[0] += USERGROUP_MAX_AGE_SECONDS - 1
    assert api.usergroup_members("S0123ABCD") == frozenset({USER, "U0456EFGHI"})
    now[0] += 2
    assert api.usergroup_members("S0123ABCD") == frozenset({USER})
    assert sum(path.startswith("/api/usergroups.users.list") for path, _ in sink.requests) == 2


def test_an_unknown_usergroup_is_permanent(api: SlackApi) -> None:
    with pytest.raises(ApiPermanentError, match="no_such_subteam"):
        api.usergroup_members("S9999ZZZZ")


@pytest.mark.parametrize(
    ("setup", "error"),
    [
        ("missing", "channel_not_found"),
        ("invalid_blocks", "invalid_blocks"),
        ("not_in_channel", "not_in_channel"),
    ],
)
def test_refusals_are_permanent(api: SlackApi, sink: SlackSink, setup: str, error: str) -> None:
    message = MESSAGE
    if setup == "missing":
        sink.missing_channels.add(CHANNEL)
    elif setup == "invalid_blocks":
        message = {
            "text": "x",
            "blocks": [{"type": "header", "text": {"type": "plain_text", "text": "h" * 151}}],
        }
    else:
        sink.script.append(403)
    with pytest.raises(ApiPermanentError) as refused:
        api.post(CHANNEL, message)
    assert refused.value.error == error
    assert sink.messages == []


def test_rate_limiting_is_retried_then_posted(api: SlackApi, sink: SlackSink, sleeps: list[float]) -> None:
    sink.script.extend([429, 429])
    ts = api.post(CHANNEL, MESSAGE)
    assert [m["ts"] for m in sink.messages] == [ts]
    assert [status for _, status in sink.requests] == [429, 429, 200]
    assert len(sleeps) == 2


@pytest.mark.parametrize("status", [429, 500, 503])
def test_slack_still_failing_after_retries_is_transient(
    api: SlackApi, sink: SlackSink, sleeps: list[float], status: int
) -> None:
    sink.always = status
    with pytest.raises(ApiDeliveryError) as failed:
        api.post(CHANNEL, MESSAGE)
    assert not isinstance(failed.value, PermanentDeliveryError)
    assert isinstance(failed.value, DeliveryError)
    assert len(sink.requests) == 3  # the first try and two retries
    assert sink.messages == []


def test_no_connection_is_transient(sleeps: list[float]) -> None:
    with SlackSink() as gone:
        url = gone.api_url
    with pytest.raises(ApiDeliveryError, match="unreachable"):
        SlackApi(LOCAL_BOT_TOKEN, url, timeout=1).post(CHANNEL, MESSAGE)


def test_the_token_never_shows_in_logs_errors_or_repr(
    sink: SlackSink, caplog: pytest.LogCaptureFixture
) -> None:
    api = SlackApi(SECRET_TOKEN, sink.api_url)
    with caplog.at_level(logging.DEBUG, logger="costguard.slack_api"):
        with pytest.raises(ApiPermanentError, match="invalid_auth") as refused:
            api.post(CHANNEL, MESSAGE)
        sink.users["alice@example.com"] = USER
        assert api.user_for("alice@example.com") is None  # invalid_auth: logged, not raised
    assert caplog.records  # slack_sdk did log the calls
    shown = [caplog.text, str(refused.value), repr(refused.value), repr(api), str(api)]
    for text in shown:
        assert "tokenSECRETvalue" not in text
        assert "xoxb-1111" not in text
    assert "invalid_auth" in caplog.text
    assert sink.messages == []


def test_the_response_url_path_never_shows_in_logs(
    api: SlackApi, sink: SlackSink, caplog: pytest.LogCaptureFixture
) -> None:
    sink.always = 404
    with (
        caplog.at_level(logging.DEBUG, logger="costguard.slack_api"),
        pytest.raises(ApiPermanentError) as refused,
    ):
        api.respond(sink.response_url("respondSECRET"), "x")
    assert "respondSECRET" not in caplog.text
    assert "respondSECRET" not in str(refused.value)


def test_redaction_keeps_api_methods_and_drops_tokens_and_paths() -> None:
    text = redact_secrets(
        "url: https://slack.com/api/chat.postMessage, https://hooks.slack.com/actions/T0/1/SECRET "
        "Bearer xoxb-1-2-SECRET xapp-1-x xoxp-3-SECRET"
    )
    assert "https://slack.com/api/chat.postMessage," in text
    assert "SECRET" not in text


def test_api_for_is_one_client_per_token_and_base_url(
    monkeypatch: pytest.MonkeyPatch, sink: SlackSink
) -> None:
    app = parse_routes(json.dumps({"bot_token": LOCAL_BOT_TOKEN, "default": CHANNEL}))
    monkeypatch.setenv(API_URL_VARIABLE, sink.api_url)
    first = api_for(app)
    assert api_for(app) is first
    assert first.post(CHANNEL, MESSAGE)  # it talks to the sink
    monkeypatch.setenv(API_URL_VARIABLE, sink.api_url.replace("127.0.0.1", "localhost"))
    assert api_for(app) is not first
    reset_cache()
    monkeypatch.setenv(API_URL_VARIABLE, sink.api_url)
    assert api_for(app) is not first


def test_api_for_refuses_the_webhook_form() -> None:
    with pytest.raises(ApiPermanentError, match="webhooks, not a Slack app") as refused:
        api_for(parse_routes("https://hooks.slack.com/services/T0/B0/webhookSECRET"))
    assert "SECRET" not in str(refused.value)


@pytest.mark.parametrize(
    "url",
    [
        "https://slack.example.com/api/",
        "http://evil.com/api/",
        "http://127.0.0.1.evil.com/api/",
        "http://localhost@evil.com/api/",
        "https://127.0.0.1:8080/api/",
        "ftp://127.0.0.1/api/",
        "http://127.0.0.1:notaport/api/",
    ],
)
def test_the_env_base_url_is_refused_unless_local(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, url: str
) -> None:
    monkeypatch.setenv(API_URL_VARIABLE, url)
    with caplog.at_level(logging.WARNING, logger="costguard.slack_api"):
        assert api_base_url() is None
    assert f"{API_URL_VARIABLE} ignored" in caplog.text


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://127.0.0.1:8080/api/", "http://127.0.0.1:8080/api/"),
        ("http://localhost:9000/api", "http://localhost:9000/api/"),
        ("", None),
    ],
)
def test_the_env_base_url_is_taken_when_local(
    monkeypatch: pytest.MonkeyPatch, url: str, expected: str | None
) -> None:
    monkeypatch.setenv(API_URL_VARIABLE, url)
    assert api_base_url() == expected


# -- lost answers, Slack's own rate limit, the deadline -----------------------------------------------------


def _first(method: str, fault: str, times: int = 1) -> Callable[[str, dict[str, Any]], str | None]:
    left = [times]

    def decide(called: str, params: dict[str, Any]) -> str | None:
        if called == method and left[0] > 0:
            left[0] -= 1
            return fault
        return None

    return decide


@pytest.fixture
def quick(sink: SlackSink, sleeps: list[float], monkeypatch: pytest.MonkeyPatch) -> SlackApi:
    """A client with a short timeout whose stalls are played (tests/integration/slack_app.py): a stall meets the
    timeout at once, and no other answer, however slow the machine, is taken for a lost one."""
    playing_stalls(monkeypatch, sink)
    return SlackApi(LOCAL_BOT_TOKEN, sink.api_url, timeout=0.2)


@pytest.mark.parametrize("fault", ["stall", "stall_after"])
def test_a_real_socket_timeout_is_an_unknown_outcome(
    sink: SlackSink, sleeps: list[float], fault: str
) -> None:
    """The one stall held on the machine's clock: slack_sdk's own socket timeout is what the played stalls stand
    for. The stalled post is the only call, so a loaded machine can only make the timeout surer."""
    sink.stall_seconds = 1.5
    sink.fault = _first("chat.postMessage", fault, times=3)
    with pytest.raises(ApiOutcomeUnknown):
        SlackApi(LOCAL_BOT_TOKEN, sink.api_url, timeout=0.3).post(CHANNEL, MESSAGE, key="k1")
    assert len(sink.messages) == (1 if fault == "stall_after" else 0)


@pytest.mark.parametrize("fault", ["reset_after", "stall_after"])
def test_a_post_whose_answer_is_lost_is_not_sent_again_by_the_client(
    quick: SlackApi, sink: SlackSink, fault: str
) -> None:
    sink.fault = _first("chat.postMessage", fault)
    with pytest.raises(ApiOutcomeUnknown):
        quick.post(CHANNEL, MESSAGE, key="k1")
    assert len(sink.messages) == 1 and len(sink.requests) == 1  # Slack took it; one request


@pytest.mark.parametrize("fault", ["reset_after", "stall_after", "reset", "stall"])
def test_post_once_looks_before_posting_again(quick: SlackApi, sink: SlackSink, fault: str) -> None:
    sink.fault = _first("chat.postMessage", fault)
    ts = quick.post_once(CHANNEL, MESSAGE, key="k1")
    [posted] = sink.messages  # taken by Slack before the answer was lost, or posted again once not found
    assert posted["ts"] == ts
    assert posted["metadata"] == {"event_type": "costguard_post", "event_payload": {"post": "k1"}}


@pytest.mark.parametrize("fault", ["stall", "reset"])
def test_an_update_is_retried_after_a_timeout_or_a_reset(
    quick: SlackApi, sink: SlackSink, fault: str
) -> None:
    ts = quick.post(CHANNEL, MESSAGE)
    sink.fault = _first("chat.update", fault)
    quick.update(CHANNEL, ts, {"text": "stopped", "blocks": []})
    assert sink.current(CHANNEL, ts)["text"] == "stopped"
    assert [p for p, _ in sink.requests].count("/api/chat.update") == 2


def test_find_reads_history_and_threads_page_by_page(
    api: SlackApi, sink: SlackSink, monkeypatch: pytest.MonkeyPatch
) -> None:
    import costguard.notify.slack_api as module

    monkeypatch.setattr(module, "FIND_PAGE_SIZE", 2)
    parent = api.post(CHANNEL, MESSAGE, key="parent")
    for n in range(4):
        api.post(CHANNEL, {"text": f"other {n}"}, key=f"other-{n}")
    reply = api.post(CHANNEL, {"text": "reply"}, thread_ts=parent, key="reply")
    assert api.find(CHANNEL, "parent") == parent  # the third page of top-level messages
    assert api.find(CHANNEL, "reply") is None  # a reply is in its thread, not in the history
    assert api.find(CHANNEL, "reply", thread_ts=parent) == reply
    assert api.find(CHANNEL, "nowhere") is None


def test_a_look_up_slack_refuses_is_none_not_an_error(api: SlackApi, sink: SlackSink) -> None:
    sink.missing_channels.add(CHANNEL)
    assert api.find(CHANNEL, "k1") is None


def test_the_web_apis_own_ratelimited_answer_is_retried_after_retry_after(
    api: SlackApi, sink: SlackSink, sleeps: list[float]
) -> None:
    sink.retry_after_seconds = 3
    sink.fault = _first("chat.postMessage", "ratelimited", times=2)
    api.post(CHANNEL, MESSAGE)
    assert len(sink.messages) == 1
    assert len(sleeps) == 2 and all(3 <= s < 4 for s in sleeps)


def test_the_web_apis_own_ratelimited_answer_past_the_retries_is_the_whole_app(
    api: SlackApi, sink: SlackSink
) -> None:
    sink.api_error = "ratelimited"
    with pytest.raises(ApiDeliveryError) as limited:
        api.post(CHANNEL, MESSAGE)
    assert limited.value.whole_app and limited.value.status == 200
    assert len(sink.requests) == 3


@pytest.mark.parametrize(
    ("error", "whole"), [("invalid_auth", True), ("token_revoked", True), ("not_in_channel", False)]
)
def test_refusals_of_the_app_itself_are_told_apart(
    api: SlackApi, sink: SlackSink, error: str, whole: bool
) -> None:
    sink.api_error = error
    with pytest.raises(ApiPermanentError) as refused:
        api.post(CHANNEL, MESSAGE)
    assert refused.value.whole_app is whole


def test_no_call_starts_that_the_deadline_cannot_cover(api: SlackApi, sink: SlackSink) -> None:
    with within(Deadline(lambda: 4.0)), pytest.raises(ApiNotStarted):  # 5 s timeout plus 3 s margin
        api.post(CHANNEL, MESSAGE)
    assert sink.requests == []


def test_no_retry_waits_past_the_deadline(api: SlackApi, sink: SlackSink, sleeps: list[float]) -> None:
    sink.retry_after_seconds = 30
    sink.always = 429
    with within(Deadline(lambda: 20.0)), pytest.raises(ApiDeliveryError):
        api.post(CHANNEL, MESSAGE)
    assert len(sink.requests) == 1 and sleeps == []  # 30 s of Retry-After do not fit in 20


def test_post_once_that_cannot_look_first_stays_unknown_and_posts_nothing(
    quick: SlackApi, sink: SlackSink
) -> None:
    sink.fault = lambda method, params: "503" if method == "conversations.history" else None
    with pytest.raises(ApiOutcomeUnknown, match="not looked for"):
        quick.post_once(CHANNEL, MESSAGE, key="k1", look_first=True)
    assert sink.messages == []
