"""The local sink plays the Slack Web API beside the webhook: what it answers and what it records."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import urlencode

import pytest
from slack_sdk import WebClient
from slack_sdk.webhook import WebhookClient

from costguard.local.sink import LOCAL_BOT_TOKEN, SlackSink

CHANNEL = "C0123ABCD"


def _call(
    sink: SlackSink,
    method: str,
    body: dict[str, Any] | None = None,
    *,
    form: bool = False,
    token: str | None = LOCAL_BOT_TOKEN,
    query: str = "",
) -> tuple[int, dict[str, str], dict[str, Any]]:
    """A raw Web API call: status, headers and the JSON answer."""
    data = (urlencode(body or {}) if form else json.dumps(body or {})).encode()
    headers = {"Content-Type": "application/x-www-form-urlencoded" if form else "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(
        f"{sink.api_url}{method}{query}", data=data, headers=headers, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, dict(response.headers), json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), json.loads(error.read())


def _client(sink: SlackSink) -> WebClient:
    return WebClient(token=LOCAL_BOT_TOKEN, base_url=sink.api_url)


def test_urls(sink: SlackSink) -> None:
    assert sink.api_url.startswith("http://127.0.0.1:")
    assert sink.api_url.endswith("/api/")
    assert sink.response_url("abc") == sink.api_url.replace("/api/", "/response/abc")


def test_post_message_answers_ok_with_increasing_ts(sink: SlackSink) -> None:
    _, _, first = _call(sink, "chat.postMessage", {"channel": CHANNEL, "text": "one"})
    _, _, second = _call(
        sink, "chat.postMessage", {"channel": CHANNEL, "text": "two", "thread_ts": first["ts"]}
    )
    assert first["ok"] and second["ok"]
    assert first["channel"] == CHANNEL
    assert first["ts"] == "1700000000.000100"
    assert float(second["ts"]) > float(first["ts"])
    assert sink.messages[0] == {
        "channel": CHANNEL,
        "ts": first["ts"],
        "method": "chat.postMessage",
        "text": "one",
    }
    assert sink.messages[1]["thread_ts"] == first["ts"]
    assert sink.thread(CHANNEL, first["ts"]) == [sink.messages[1]]


def test_a_form_body_and_a_query_string_are_read_too(sink: SlackSink) -> None:
    blocks = [{"type": "section", "text": {"type": "mrkdwn", "text": "hi"}}]
    status, _, answer = _call(
        sink, "chat.postMessage", {"channel": CHANNEL, "text": "hi", "blocks": json.dumps(blocks)}, form=True
    )
    assert (status, answer["ok"]) == (200, True)
    assert sink.messages[0]["blocks"] == blocks
    sink.users["a@example.com"] = "U0123ABCDE"
    _, _, found = _call(sink, "users.lookupByEmail", form=True, query="?email=a%40example.com")
    assert found == {"ok": True, "user": {"id": "U0123ABCDE", "profile": {"email": "a@example.com"}}}
    assert sink.lookups == ["a@example.com"]


def test_a_token_in_the_form_is_accepted_and_never_recorded(sink: SlackSink) -> None:
    _, _, answer = _call(
        sink,
        "chat.postMessage",
        {"channel": CHANNEL, "text": "x", "token": LOCAL_BOT_TOKEN},
        form=True,
        token=None,
    )
    assert answer["ok"]
    assert "token" not in sink.messages[0]


@pytest.mark.parametrize("token", [None, "xoxb-wrong", ""])
def test_a_bad_or_missing_token_is_invalid_auth(sink: SlackSink, token: str | None) -> None:
    status, _, answer = _call(sink, "chat.postMessage", {"channel": CHANNEL, "text": "x"}, token=token)
    assert (status, answer) == (200, {"ok": False, "error": "invalid_auth"})
    assert sink.messages == []


def test_the_expected_token_is_configurable() -> None:
    with SlackSink(bot_token="xoxb-other") as sink:
        assert (
            _call(sink, "chat.postMessage", {"channel": CHANNEL, "text": "x"})[2]["error"] == "invalid_auth"
        )
        assert _call(sink, "chat.postMessage", {"channel": CHANNEL, "text": "x"}, token="xoxb-other")[2]["ok"]


def test_a_missing_channel_is_channel_not_found(sink: SlackSink) -> None:
    sink.missing_channels.add("C9999ZZZZ")
    status, _, answer = _call(sink, "chat.postMessage", {"channel": "C9999ZZZZ", "text": "x"})
    assert (status, answer) == (200, {"ok": False, "error": "channel_not_found"})
    assert sink.messages == []
    assert sink.refused[-1][1] == "channel_not_found"


def test_strict_blocks_are_refused_like_slack(sink: SlackSink) -> None:
    too_long = [{"type": "header", "text": {"type": "plain_text", "text": "h" * 151}}]
    status, _, answer = _call(sink, "chat.postMessage", {"channel": CHANNEL, "text": "x", "blocks": too_long})
    assert (status, answer) == (200, {"ok": False, "error": "invalid_blocks"})
    sink.strict = False
    assert _call(sink, "chat.postMessage", {"channel": CHANNEL, "text": "x", "blocks": too_long})[2]["ok"]


def test_update_changes_the_current_view_not_the_posts(sink: SlackSink) -> None:
    ts = _call(sink, "chat.postMessage", {"channel": CHANNEL, "text": "marked", "blocks": []})[2]["ts"]
    _, _, answer = _call(sink, "chat.update", {"channel": CHANNEL, "ts": ts, "text": "stopped"})
    assert answer == {"ok": True, "channel": CHANNEL, "ts": ts, "text": "stopped"}
    assert len(sink.messages) == 1
    assert sink.messages[0]["text"] == "marked"
    assert sink.current(CHANNEL, ts)["text"] == "stopped"
    assert sink.current(CHANNEL, ts)["blocks"] == []  # not in the update: kept
    assert sink.updates == [{"channel": CHANNEL, "ts": ts, "text": "stopped"}]
    _, _, missing = _call(sink, "chat.update", {"channel": CHANNEL, "ts": "1.2", "text": "x"})
    assert missing == {"ok": False, "error": "message_not_found"}
    with pytest.raises(KeyError):
        sink.current(CHANNEL, "1.2")


def test_ephemeral_and_usergroups(sink: SlackSink) -> None:
    _, _, answer = _call(
        sink, "chat.postEphemeral", {"channel": CHANNEL, "user": "U0123ABCDE", "text": "psst"}
    )
    assert answer["ok"] and answer["message_ts"]
    assert sink.ephemerals == [{"channel": CHANNEL, "user": "U0123ABCDE", "text": "psst"}]
    assert sink.messages == []
    sink.usergroups["S0123"] = ["U0123ABCDE"]
    assert _call(sink, "usergroups.users.list", {"usergroup": "S0123"})[2] == {
        "ok": True,
        "users": ["U0123ABCDE"],
    }
    assert _call(sink, "usergroups.users.list", {"usergroup": "S0"})[2] == {
        "ok": False,
        "error": "no_such_subteam",
    }


def test_an_unknown_email_is_users_not_found_and_counted(sink: SlackSink) -> None:
    client = _client(sink)
    for _ in range(2):
        with pytest.raises(Exception, match="users_not_found"):
            client.users_lookupByEmail(email="nobody@example.com")
    assert sink.lookups == ["nobody@example.com", "nobody@example.com"]  # the sink itself does not cache


def test_scripted_429_and_500_keep_their_status_with_a_json_error(sink: SlackSink) -> None:
    sink.retry_after_seconds = 7
    sink.script.extend([429, 500])
    status, headers, answer = _call(sink, "chat.postMessage", {"channel": CHANNEL, "text": "x"})
    assert (status, headers["Retry-After"], answer) == (429, "7", {"ok": False, "error": "ratelimited"})
    status, _, answer = _call(sink, "users.lookupByEmail", {"email": "a@example.com"})
    assert (status, answer) == (500, {"ok": False, "error": "internal_error"})
    assert [s for _, s in sink.requests] == [429, 500]
    assert sink.messages == [] and sink.lookups == []


def test_always_says_slack_is_down_for_the_api_too(sink: SlackSink) -> None:
    sink.always = 503
    assert _call(sink, "chat.postMessage", {"channel": CHANNEL, "text": "x"})[0] == 503
    sink.always = None
    assert _call(sink, "chat.postMessage", {"channel": CHANNEL, "text": "x"})[2]["ok"]


def test_a_response_url_is_recorded_apart_from_messages(sink: SlackSink) -> None:
    response = WebhookClient(sink.response_url("click-1")).send_dict(
        {"text": "done", "replace_original": True}
    )
    assert (response.status_code, response.body) == (200, "ok")
    assert sink.responses == [{"path": "/response/click-1", "text": "done", "replace_original": True}]
    assert sink.messages == []


def test_the_webhook_works_as_before_beside_the_api(sink: SlackSink) -> None:
    assert WebhookClient(sink.url_for("alerts")).send_dict({"text": "hook"}).status_code == 200
    ts = _client(sink).chat_postMessage(channel=CHANNEL, text="api")["ts"]
    assert sink.messages == [
        {"channel": "alerts", "text": "hook"},
        {"channel": CHANNEL, "ts": ts, "method": "chat.postMessage", "text": "api"},
    ]
    assert [path for path, _ in sink.requests] == ["/services/T000/B000/alerts", "/api/chat.postMessage"]


def test_history_and_replies_page_through_what_was_posted_with_its_metadata(sink: SlackSink) -> None:
    meta = {"event_type": "costguard_post", "event_payload": {"post": "k1"}}
    parent = _call(sink, "chat.postMessage", {"channel": CHANNEL, "text": "parent", "metadata": meta})[2][
        "ts"
    ]
    reply = _call(sink, "chat.postMessage", {"channel": CHANNEL, "text": "reply", "thread_ts": parent})[2][
        "ts"
    ]
    later = _call(sink, "chat.postMessage", {"channel": CHANNEL, "text": "later"})[2]["ts"]
    _call(sink, "chat.update", {"channel": CHANNEL, "ts": parent, "text": "parent, updated"})
    _, _, first = _call(sink, "conversations.history", form=True, query=f"?channel={CHANNEL}&limit=1")
    assert [m["ts"] for m in first["messages"]] == [later]  # newest first, top-level only
    assert first["has_more"] and first["response_metadata"]["next_cursor"]
    cursor = first["response_metadata"]["next_cursor"]
    query = f"?channel={CHANNEL}&limit=1&cursor={cursor}&include_all_metadata=1"
    _, _, second = _call(sink, "conversations.history", form=True, query=query)
    [message] = second["messages"]
    assert (message["ts"], message["text"], message["metadata"]) == (parent, "parent, updated", meta)
    assert not second["has_more"]
    _, _, thread = _call(sink, "conversations.replies", {"channel": CHANNEL, "ts": parent})
    assert [m["ts"] for m in thread["messages"]] == [parent, reply]
    assert "metadata" not in thread["messages"][0]  # only when asked for
    assert (
        _call(sink, "conversations.replies", {"channel": CHANNEL, "ts": "1.2"})[2]["error"]
        == "thread_not_found"
    )


def test_a_fault_before_acting_records_nothing_and_after_acting_records_the_post(sink: SlackSink) -> None:
    faults = iter(["reset", "reset_after", "503", "ratelimited"])
    sink.fault = lambda method, params: next(faults, None)
    with pytest.raises(OSError):  # reset: no answer at all
        _call(sink, "chat.postMessage", {"channel": CHANNEL, "text": "one"})
    with pytest.raises(OSError):  # reset after Slack took it
        _call(sink, "chat.postMessage", {"channel": CHANNEL, "text": "two"})
    assert _call(sink, "chat.postMessage", {"channel": CHANNEL, "text": "x"})[0] == 503
    status, headers, answer = _call(sink, "chat.postMessage", {"channel": CHANNEL, "text": "x"})
    assert (status, answer, headers["Retry-After"]) == (200, {"ok": False, "error": "ratelimited"}, "0")
    assert [m["text"] for m in sink.messages] == ["two"]
    assert sink.faults == {"reset": 1, "reset_after": 1, "503": 1, "ratelimited": 1}


def test_a_stall_after_acting_keeps_the_post_and_the_answer_comes_too_late(sink: SlackSink) -> None:
    sink.stall_seconds = 0.5
    sink.fault = lambda method, params: "stall_after"
    request = urllib.request.Request(
        f"{sink.api_url}chat.postMessage",
        data=json.dumps({"channel": CHANNEL, "text": "slow"}).encode(),
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {LOCAL_BOT_TOKEN}"},
    )
    with pytest.raises(TimeoutError):
        urllib.request.urlopen(request, timeout=0.1)
    assert [m["text"] for m in sink.messages] == ["slow"]


def test_an_api_error_refuses_every_call(sink: SlackSink) -> None:
    sink.api_error = "token_revoked"
    assert _call(sink, "chat.postMessage", {"channel": CHANNEL, "text": "x"})[2] == {
        "ok": False,
        "error": "token_revoked",
    }
    assert _call(sink, "conversations.history", {"channel": CHANNEL})[2]["error"] == "token_revoked"
    assert sink.messages == []
