"""The organization's parts that need no AWS: where a call lands, the sweep's plan, routes by account and OU, an
organization budget's linked accounts, an account named in a message."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from costguard.aws import clients, organization
from costguard.detect.budgets import Scope, scope_from_budget
from costguard.events.scheduled import ScheduledEvent
from costguard.flows import org
from costguard.model import Resource, ResourceKind
from costguard.notify.routing import parse_routes
from costguard.notify.text import account_text
from costguard.settings import SettingsError, parse_settings

HUB, MEMBER = "111111111111", "222222222222"
EVENT = ScheduledEvent.model_validate(
    {
        "version": "0",
        "id": "c0ffee00-0000-4000-8000-000000000201",
        "detail-type": "Scheduled Event",
        "source": "aws.events",
        "account": HUB,
        "time": "2026-11-20T12:00:00Z",
        "region": "us-east-1",
        "resources": ["arn:aws:events:us-east-1:111111111111:rule/costguard-gpu-sweep"],
        "detail": {},
    }
)


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COSTGUARD_MEMBER_ROLE_NAME", "costguard-member")
    monkeypatch.setenv("COSTGUARD_HOME_ACCOUNT", HUB)
    monkeypatch.setenv("AWS_REGION", "us-east-1")


def test_a_single_account_deployment_never_goes_through_a_member_role() -> None:
    assert not clients.is_member(MEMBER, "us-west-2")
    assert not clients.is_member(HUB)


@pytest.mark.usefixtures("hub")
def test_another_account_and_the_hubs_other_regions_go_through_the_member_role() -> None:
    assert clients.is_member(MEMBER, "us-east-1")
    assert clients.is_member(HUB, "us-west-2")  # the hub's own role acts in its own region only
    assert not clients.is_member(HUB, "us-east-1") and not clients.is_member(None)
    assert (
        clients.member_role_arn(MEMBER, "us-west-2")
        == "arn:aws:iam::222222222222:role/costguard-member-us-west-2"
    )


@pytest.mark.usefixtures("hub")
def test_the_acting_account_is_scoped_to_its_block() -> None:
    with clients.acting_in(MEMBER):
        assert clients.acting_account() == MEMBER
        with clients.acting_in(HUB):
            assert clients.acting_account() == HUB
        assert clients.acting_account() == MEMBER
    assert clients.acting_account() is None


def test_named_accounts_are_planned_without_asking_organizations(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(organization, "directory", lambda: pytest.fail("Organizations was asked"))
    settings = parse_settings(
        member_role_name="costguard-member", accounts=f"{HUB},{MEMBER}", regions="us-east-1,us-west-2"
    )
    items = org.plan("gpu", EVENT, settings)
    assert [(i.account, i.region) for i in items] == [
        (HUB, "us-east-1"),
        (HUB, "us-west-2"),
        (MEMBER, "us-east-1"),
        (MEMBER, "us-west-2"),
    ]
    assert {i.event_id for i in items} == {EVENT.id} and {i.sweep for i in items} == {"gpu"}


def test_without_named_accounts_every_active_account_is_planned_with_its_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class Directory:
        def active(self) -> list[organization.Account]:
            return [organization.Account(HUB, "platform"), organization.Account(MEMBER, "research")]

    monkeypatch.setattr(organization, "directory", Directory)
    items = org.plan("sagemaker", EVENT, parse_settings(member_role_name="costguard-member"))
    assert [(i.account, i.region, i.account_name) for i in items] == [
        (HUB, "us-east-1", "platform"),
        (MEMBER, "us-east-1", "research"),
    ]


def test_an_organization_sweep_without_its_work_queue_fails_at_cold_start() -> None:
    with pytest.raises(SettingsError, match="COSTGUARD_SWEEP_QUEUE_URL"):
        org.check_settings(parse_settings(member_role_name="costguard-member"))
    assert org.check_settings(parse_settings()).sweep_queue_url == ""  # a single account needs none


def test_accounts_setting_refuses_what_is_not_an_account_id() -> None:
    with pytest.raises(SettingsError, match="COSTGUARD_ACCOUNTS"):
        parse_settings(accounts="111111111111,12345")


def routes() -> Any:
    return parse_routes(
        json.dumps(
            {
                "default": "https://hooks.slack.com/services/T0/B0/default",
                "routes": {
                    "ml-research": "https://hooks.slack.com/services/T0/B0/team",
                    f"account:{MEMBER}": "https://hooks.slack.com/services/T0/B0/account",
                    "ou:ou-root-vision000": "https://hooks.slack.com/services/T0/B0/ou",
                },
            }
        )
    )


@pytest.mark.parametrize(
    ("tags", "account", "ou", "expected"),
    [
        ({"team": "ml-research"}, MEMBER, "ou-root-vision000", "team"),  # the tag wins
        ({}, MEMBER, "ou-root-vision000", "account"),  # then the account
        ({}, "333333333333", "ou-root-vision000", "ou"),  # then its OU
        ({"team": "nobody"}, "333333333333", None, "default"),
    ],
)
def test_a_notice_follows_its_tag_then_its_account_then_its_ou(
    tags: dict[str, str], account: str, ou: str | None, expected: str
) -> None:
    assert routes().channel_for(tags, "team", account, ou).rsplit("/", 1)[-1] == expected


def test_an_organization_budget_covers_its_linked_accounts_only() -> None:
    scope = scope_from_budget({"CostFilters": {"LinkedAccount": [MEMBER, "not-an-id"]}})
    assert scope.accounts == (MEMBER,)
    expression = scope_from_budget(
        {"FilterExpression": {"Dimensions": {"Key": "LINKED_ACCOUNT", "Values": [HUB]}}}
    )
    assert expression.accounts == (HUB,)

    def resource(account: str) -> Resource:
        return Resource(kind=ResourceKind.EC2_INSTANCE, id="i-1", account=account, region="us-east-1")

    assert scope.covers(resource(MEMBER)) and not scope.covers(resource(HUB))
    assert Scope().covers(resource(HUB))
    assert "linked accounts 222222222222" in scope.describe()


def test_a_message_names_the_account_where_organizations_knows_it() -> None:
    assert account_text(MEMBER, "research") == "research (222222222222)"
    assert account_text(MEMBER) == MEMBER
    assert (
        account_text(MEMBER, "<!here> *bold*") != f"<!here> *bold* ({MEMBER})"
    )  # escaped like any AWS string
    assert account_text("12345", "research").startswith("invalid account id")


def test_the_sweep_item_refuses_what_is_not_an_account_or_region() -> None:
    base = {
        "sweep": "gpu",
        "account": MEMBER,
        "region": "us-east-1",
        "event_id": "e",
        "time": datetime.now(UTC),
    }
    org.SweepItem.model_validate(base)
    for bad in ({"account": "22222222222a"}, {"region": "us-east-1; rm"}, {"extra": 1}):
        with pytest.raises(ValueError):
            org.SweepItem.model_validate(base | bad)


def test_a_stop_all_breach_keeps_its_linked_accounts_in_force() -> None:
    from costguard.detect.budgets import AlertType, BudgetAlert
    from costguard.detect.escalation import Escalation
    from costguard.twins import MemoryBreachLog

    log = MemoryBreachLog()
    alert = BudgetAlert(name="org-gpu", alert_type=AlertType.ACTUAL)
    now = datetime(2026, 11, 20, 12, tzinfo=UTC)
    log.remember(
        alert, HUB, "us-east-1", now, escalation=Escalation.STOP_ALL, scope=Scope(accounts=(MEMBER,))
    )
    [scope] = log.stop_all_scopes(now)
    assert scope.accounts == (MEMBER,)  # its marks on busy instances hold in the linked accounts only
