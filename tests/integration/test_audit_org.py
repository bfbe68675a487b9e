"""The right-sizing audit over an organization: statemachine/audit.asl.json executed by moto from the hub, over
three accounts and two regions, the member accounts reached through their member roles, one of which was never
deployed (AssumeRole is AccessDenied): one report, a row per account and per team, that account-region named
with its error, the other five audited."""

from __future__ import annotations

import json
from typing import Any

import pytest

from costguard.local.audit import AuditRun, print_summary, run_audit
from costguard.local.world import World
from costguard.pricing import bundled_table

HUB, RESEARCH, VISION = "111111111111", "222222222222", "333333333333"
MISSING = (RESEARCH, "us-west-2")
HOURS = 730
EC2 = bundled_table()["ec2"]
NAMES = {HUB: "platform", RESEARCH: "research", VISION: "vision"}


def idle(instance_id: str, name: str, team: str, instance_type: str = "g6e.12xlarge") -> dict[str, Any]:
    """Two weeks of no GPU work: a rightsize_idle finding, saving all of its price."""
    return {
        "id": instance_id,
        "name": name,
        "type": instance_type,
        "launched": "2026-10-30T09:00:00Z",
        "tags": {"team": team},
        "gpu_metrics": {"pattern": "idle"},
        "cpu_percent": 3,
        "usage": {"gpu_percent": 1, "swing": 1, "memory_used_gib": 0.5},
    }


def busy(instance_id: str, name: str, team: str, instance_type: str = "g6.xlarge") -> dict[str, Any]:
    """Two weeks of a well-used GPU: audited, no finding."""
    return {
        "id": instance_id,
        "name": name,
        "type": instance_type,
        "launched": "2026-10-30T09:00:00Z",
        "tags": {"team": team},
        "gpu_metrics": {"pattern": "busy"},
        "cpu_percent": 60,
        "usage": {"gpu_percent": 92, "swing": 4, "memory_used_gib": 20},
    }


WORLD = {
    "account": HUB,
    "region": "us-east-1",
    "now": "2026-11-20T12:00:00Z",
    "organization": {
        "id": "o-exampleorg01",
        "role": "costguard-member",
        "accounts": [
            {"id": HUB, "name": "platform", "ou": "ou-root-platform0"},
            {"id": RESEARCH, "name": "research", "ou": "ou-root-research0"},
            {"id": VISION, "name": "vision", "ou": "ou-root-vision000"},
        ],
    },
    "instances": [busy("i-0c0a00000000000a1", "platform-serving", "platform")],
    "members": [
        {
            "account": HUB,
            "region": "us-west-2",
            "instances": [idle("i-0c0a00000000000b1", "platform-forgotten", "platform")],
        },
        {
            "account": RESEARCH,
            "region": "us-east-1",
            "instances": [
                idle("i-0c0a00000000000c1", "research-forgotten", "ml-research"),
                busy("i-0c0a00000000000c2", "research-trainer", "ml-research"),
            ],
        },
        {
            "account": RESEARCH,
            "region": "us-west-2",
            "role": "missing",  # member.yaml never deployed here
            "instances": [idle("i-0c0a00000000000d1", "research-unseen", "ml-research")],
        },
        {
            "account": VISION,
            "region": "us-east-1",
            "instances": [idle("i-0c0a00000000000e1", "vision-forgotten", "vision")],
        },
        {
            "account": VISION,
            "region": "us-west-2",
            "instances": [busy("i-0c0a00000000000f1", "vision-serving", "vision")],
        },
    ],
}
IDLE_SAVING = EC2["g6e.12xlarge"] * HOURS


@pytest.fixture(scope="module")
def org() -> AuditRun:
    run = run_audit(World.model_validate(WORLD))
    assert run.status == "SUCCEEDED", run.error
    return run


def test_one_report_covers_every_account_and_region(org: AuditRun) -> None:
    assert org.report is not None
    places = {(r["account"], r["region"]): r for r in org.report["regions"]}
    assert set(places) == {(a, r) for a in NAMES for r in ("us-east-1", "us-west-2")}
    assert [p for p, r in places.items() if r["status"] != "ok"] == [MISSING]
    assert {p: r["resources"] for p, r in places.items() if r["status"] == "ok"} == {
        (HUB, "us-east-1"): 1,
        (HUB, "us-west-2"): 1,
        (RESEARCH, "us-east-1"): 2,
        (VISION, "us-east-1"): 1,
        (VISION, "us-west-2"): 1,
    }
    # Each finding was found in its own account and region: the member accounts through their roles.
    found = {
        (f["resource"]["account"], f["resource"]["region"], f["resource"]["id"])
        for f in org.report["findings"]
    }
    assert found == {
        (HUB, "us-west-2", "i-0c0a00000000000b1"),
        (RESEARCH, "us-east-1", "i-0c0a00000000000c1"),
        (VISION, "us-east-1", "i-0c0a00000000000e1"),
    }
    assert org.report["totals"]["monthly_saving_usd"] == pytest.approx(3 * IDLE_SAVING, abs=0.05)
    assert org.states[0] == "Plan" and org.states[-1] == "Report" and "AccountRegions" in org.states


def test_the_failed_account_region_is_named_with_its_error(org: AuditRun) -> None:
    assert org.report is not None
    [failure] = org.report["failures"]
    assert (failure["account"], failure["account_name"], failure["region"]) == (
        RESEARCH,
        "research",
        "us-west-2",
    )
    assert "AccessDenied" in failure["message"] and "AssumeRole" in failure["message"]
    assert "costguard-member-us-west-2" in failure["message"]  # the role that is not there
    assert org.report["totals"]["failed_regions"] == ["research (222222222222)/us-west-2"]
    assert org.report["totals"]["failed_items"] == 1
    # The other account-regions of that account were audited.
    research = next(a for a in org.report["accounts"] if a["account"] == RESEARCH)
    assert research["regions"] == ["us-east-1", "us-west-2"]
    assert [f["region"] for f in research["failed"]] == ["us-west-2"]
    assert research["resources"] == 2 and research["findings"] == 1


def test_the_per_account_table(org: AuditRun) -> None:
    assert org.report is not None
    accounts = {a["account"]: a for a in org.report["accounts"]}
    assert {a: row["name"] for a, row in accounts.items()} == NAMES  # named from Organizations
    for account in NAMES:
        row = accounts[account]
        assert row["findings"] == 1
        assert row["monthly_saving_usd"] == pytest.approx(IDLE_SAVING, abs=0.01)
    assert accounts[HUB]["resources"] == 2 and accounts[VISION]["resources"] == 2
    assert accounts[HUB]["failed"] == [] and accounts[VISION]["failed"] == []
    assert sum(a["monthly_cost_usd"] for a in accounts.values()) == pytest.approx(
        org.report["totals"]["monthly_cost_usd"], abs=0.05
    )
    teams = org.report["by_team"]
    assert set(teams) == {"platform", "ml-research", "vision"}
    assert teams["ml-research"]["resources"] == 2  # the unseen region's instance is not counted
    assert teams["platform"]["findings"] == teams["vision"]["findings"] == 1


def test_the_page_and_the_summary_name_the_accounts_and_the_failure(org: AuditRun) -> None:
    assert org.html is not None and org.report is not None
    assert org.html.count('<tr class="account') == 3
    assert '<tr class="account failed" data-account="222222222222">' in org.html
    assert "research (222222222222)/us-west-2: " in org.html
    assert "AccessDenied" in org.html
    [message] = org.slack
    text = json.dumps(message)
    assert "*By account*" in text and "*By team*" in text
    assert "research (222222222222)/us-west-2: " in text and "AccessDenied" in text


def test_each_item_wrote_under_its_account(org: AuditRun) -> None:
    """Each item ran Discover, ReadMetrics and Evaluate in its own child execution, writing under
    runs/<run>/<account>/<region>/; the refused one wrote nothing."""
    run = org.output["run"]
    expected = {
        f"runs/{run}/{account}/{region}/{name}.json"
        for account in NAMES
        for region in ("us-east-1", "us-west-2")
        if (account, region) != MISSING
        for name in ("subjects", "holdings", "usage", "result")
    }
    # Beside them, the items Plan wrote for the Map's ItemReader.
    assert set(org.keys) == expected | {f"runs/{run}/items.json"}


def test_the_map_reads_its_items_from_s3_and_writes_its_outcomes_there(org: AuditRun) -> None:
    """No list of items or outcomes passes through the execution's state (256 KB): the Map reads Plan's items
    from S3 and its ResultWriter writes the children's outcomes and a manifest there, which the report reads."""
    run = org.output["run"]
    assert org.report_input["items"] == {"key": f"runs/{run}/items.json", "count": 6}
    manifest = org.report_input["results"]["manifest"]
    assert manifest["Key"] in org.map_results and manifest["Key"].endswith("/manifest.json")
    assert [k for k in org.map_results if k.endswith("/SUCCEEDED_0.json")]
    assert "regions" not in org.report_input  # the outcomes are not in the state
    places = {(r["account"], r["region"]) for r in org.report["regions"]}  # type: ignore[index]
    assert len(places) == 6 and MISSING in places


def test_the_command_line_summary_names_the_accounts_and_the_failure(
    org: AuditRun, capsys: pytest.CaptureFixture[str]
) -> None:
    print_summary(org, [])
    out = capsys.readouterr().out
    assert "account research (222222222222): " in out and "1 FAILED" in out
    assert "research (222222222222)/us-west-2 FAILED: " in out and "AccessDenied" in out
