"""Who may click: COSTGUARD_SLACK_ALLOWED parsed at start-up, and each click checked against it."""

from __future__ import annotations

import pytest

from costguard.interact.authorize import Allowed, AllowedError, parse_allowed, refusal


class Directory:
    def __init__(self, users: dict[str, str], groups: dict[str, frozenset[str]]) -> None:
        self.users, self.groups = users, groups
        self.asked: list[str] = []

    def user_for(self, owner_tag_value: str) -> str | None:
        self.asked.append(f"user:{owner_tag_value}")
        return self.users.get(owner_tag_value)

    def usergroup_members(self, group_id: str) -> frozenset[str]:
        self.asked.append(f"group:{group_id}")
        return self.groups.get(group_id, frozenset())


SLACK = Directory({"dana@example.com": "U0DANA0001"}, {"S0OPS": frozenset({"U0OPS00001"})})
OWNED = {"owner": "dana@example.com"}


def test_the_default_is_anyone_in_the_channel() -> None:
    assert parse_allowed("") == Allowed(channel=True)
    assert parse_allowed("  channel ") == Allowed(channel=True)
    assert refusal(parse_allowed(""), "U0ANYONE01", {}, SLACK) is None


def test_parts_combine_with_plus() -> None:
    assert parse_allowed("owner+usergroups:S0123,S0456") == Allowed(owner=True, usergroups=("S0123", "S0456"))


@pytest.mark.parametrize("text", ["everyone", "usergroups:", "usergroups:team-a", "owner+", "owner+admins"])
def test_a_bad_value_names_the_variable(text: str) -> None:
    with pytest.raises(AllowedError, match="COSTGUARD_SLACK_ALLOWED"):
        parse_allowed(text)


def test_owner_allows_the_user_the_owner_tag_names_only() -> None:
    allowed = parse_allowed("owner")
    assert refusal(allowed, "U0DANA0001", OWNED, SLACK) is None
    assert refusal(allowed, "U0OPS00001", OWNED, SLACK) is not None
    assert refusal(allowed, "U0DANA0001", {}, SLACK) is not None  # no owner tag: nobody


def test_usergroups_allow_their_members() -> None:
    allowed = parse_allowed("owner+usergroups:S0OPS")
    assert refusal(allowed, "U0OPS00001", OWNED, SLACK) is None
    why = refusal(allowed, "U0GUEST001", OWNED, SLACK)
    assert why is not None and "owner" in why and "S0OPS" in why


def test_slack_is_asked_only_as_far_as_needed() -> None:
    slack = Directory({"dana@example.com": "U0DANA0001"}, {})
    assert refusal(parse_allowed("owner+usergroups:S0OPS"), "U0DANA0001", OWNED, slack) is None
    assert slack.asked == ["user:dana@example.com"]
