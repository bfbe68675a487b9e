"""The demo's headline counts each resource's dollars once and keeps account-wide figures apart."""

from __future__ import annotations

from typing import Any

from costguard.local.headline import headline, summary_lines


def finding(reason: str, kind: str, rid: str, cost: float | None) -> dict[str, Any]:
    return {"reason": reason, "resource_kind": kind, "resource_id": rid, "cost_usd": cost}


def decision(action: str, kind: str, rid: str, hourly: float | None) -> dict[str, Any]:
    return {"action": action, "resource_kind": kind, "resource_id": rid, "hourly_usd": hourly}


def test_a_job_warned_then_stopped_counts_once_at_its_latest_figure() -> None:
    head = headline(
        [
            finding("job_cost_warning", "training_job", "j1", 80.0),
            finding("job_cost_ceiling", "training_job", "j1", 100.5),
            finding("training_job_failed", "training_job", "j2", 10.0),
        ],
        [],
    )
    assert head.spent_usd == 110.5
    assert head.spent_by_resource == {("training_job", "j1"): 100.5, ("training_job", "j2"): 10.0}


def test_loops_budgets_anomalies_and_digests_are_context_not_added() -> None:
    head = headline(
        [
            finding("training_job_failed", "training_job", "j1", 10.0),
            finding("training_job_failed", "training_job", "j2", 12.0),
            finding("job_failure_loop", "job_family", "fam", 22.0),  # j1 + j2 again
            finding("budget_breach", "budget", "b/ACTUAL>100", 5120.4),
            finding("cost_anomaly", "cost_anomaly", "a1", 412.5),
            finding("training_digest", "training_digest", "d", 8.0),
            finding("batch_retry_loop", "batch_queue", "q", 30.0),
        ],
        [],
    )
    assert head.spent_usd == 22.0
    assert {c[0] for c in head.context} == {
        "job_failure_loop",
        "budget_breach",
        "cost_anomaly",
        "training_digest",
        "batch_retry_loop",
    }
    lines = summary_lines(head)
    assert lines[0].startswith("$22.00 already spent by the 2 flagged resources")
    assert "  budget_breach b/ACTUAL>100: $5,120.40" in lines


def test_hourly_counts_each_resource_it_would_stop_once_at_its_latest_decision() -> None:
    head = headline(
        [],
        [
            decision("mark", "ec2_instance", "i-1", 21.958),
            decision("stop", "ec2_instance", "i-1", 21.958),
            decision("mark", "ec2_instance", "i-2", 10.0),
            decision("unmark", "ec2_instance", "i-2", 10.0),  # busy again: no longer to be stopped
            decision("notify", "ec2_instance", "i-3", 5.0),
        ],
    )
    assert head.hourly_usd == 21.96
    assert list(head.hourly_by_resource) == [("ec2_instance", "i-1")]
