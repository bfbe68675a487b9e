"""A function missing a table, queue, bucket or secret it needs fails at its Lambda cold start, naming the
variable, rather than at its first use of it."""

from __future__ import annotations

import importlib.util
import uuid
from functools import cache
from types import ModuleType

import pytest

from bench.imports import handler_environment
from costguard.local.template import Function, Template
from costguard.settings import Settings, SettingsError, get_settings, parse_settings, require
from tests.conftest import ROOT

EVENT_FLOW = {"COSTGUARD_STATE_TABLE", "COSTGUARD_DECISIONS_QUEUE_URL", "COSTGUARD_FAILED_EVENTS_QUEUE_URL"}
AUDIT_STEP = {"COSTGUARD_AUDIT_BUCKET", "COSTGUARD_FAILED_EVENTS_QUEUE_URL"}
# What each function's path uses: a malformed event is kept in the failed-events queue (entry.reject), a
# flow acts through the state table and the decisions queue (runtime.runtime, OncePerEvent), the audit's
# steps read and write the audit bucket (the plan writes the Distributed Map's items there, for its ItemReader),
# the Slack-facing functions read the Slack secret.
REQUIRED = {
    "AuditPlanFunction": AUDIT_STEP,
    "AuditDiscoverFunction": AUDIT_STEP,
    "AuditMetricsFunction": AUDIT_STEP,
    "AuditEvaluateFunction": AUDIT_STEP,
    "AuditReportFunction": AUDIT_STEP,
    "BatchJobsFunction": EVENT_FLOW,
    "BudgetsFunction": EVENT_FLOW,
    "CapacityFunction": EVENT_FLOW,
    "EksGpuFunction": EVENT_FLOW,
    "GpuAlarmsFunction": {"COSTGUARD_FAILED_EVENTS_QUEUE_URL"},
    "GpuIdleFunction": EVENT_FLOW,
    "SageMakerIdleFunction": EVENT_FLOW,
    "SpotInterruptionsFunction": EVENT_FLOW,
    "HyperPodFunction": EVENT_FLOW,
    "TrainingCeilingsFunction": EVENT_FLOW,
    "TrainingJobsFunction": EVENT_FLOW,
    "LedgerReportFunction": EVENT_FLOW,
    "NotifierFunction": {
        "COSTGUARD_STATE_TABLE",
        "COSTGUARD_FAILED_EVENTS_QUEUE_URL",
        "COSTGUARD_SLACK_SECRET_ID",
    },
    "InteractionsFunction": {"COSTGUARD_STATE_TABLE", "COSTGUARD_SLACK_SECRET_ID"},
    "InteractionActionsFunction": {
        "COSTGUARD_STATE_TABLE",
        "COSTGUARD_DECISIONS_QUEUE_URL",
        "COSTGUARD_SLACK_SECRET_ID",
    },
}
CANDIDATES = sorted(set().union(*REQUIRED.values()) | {"COSTGUARD_SWEEP_QUEUE_URL"})


@cache
def template() -> Template:
    return Template.load(ROOT / "template.yaml")


def functions() -> dict[str, Function]:
    return template().functions()


def cold_start(function: Function, monkeypatch: pytest.MonkeyPatch, **changed: str) -> ModuleType:
    """Import the handler's module as Lambda would start it: the template's environment, ``changed`` over it."""
    for key, value in (handler_environment(template(), function.logical_id) | changed).items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", function.logical_id)
    get_settings.cache_clear()
    spec = importlib.util.spec_from_file_location(
        f"cold_{function.logical_id}_{uuid.uuid4().hex[:8]}", function.module_path
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_function_is_listed() -> None:
    assert sorted(functions()) == sorted(REQUIRED)


def test_a_missing_setting_is_named_at_a_lambda_cold_start(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", "f")
    settings = parse_settings(state_table="costguard-state")
    assert require(settings, "state_table") is settings
    with pytest.raises(SettingsError) as raised:
        require(settings, "state_table", "decisions_queue_url", "failed_events_queue_url")
    assert "COSTGUARD_DECISIONS_QUEUE_URL" in str(raised.value)
    assert "COSTGUARD_FAILED_EVENTS_QUEUE_URL" in str(raised.value)
    assert "COSTGUARD_STATE_TABLE" not in str(raised.value)
    with pytest.raises(SettingsError, match="COSTGUARD_AUDIT_BUCKET"):
        require(parse_settings(audit_bucket="  "), "audit_bucket")


def test_outside_lambda_values_are_not_checked_but_names_are() -> None:
    # The IAM check imports every handler for its PERMISSIONS, with no costguard variables set.
    settings = Settings()
    assert require(settings, "state_table", "audit_bucket") is settings
    with pytest.raises(ValueError, match="state_tabel"):
        require(settings, "state_tabel")


@pytest.mark.parametrize("logical_id", sorted(REQUIRED))
def test_each_function_starts_with_the_templates_environment(
    logical_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = cold_start(functions()[logical_id], monkeypatch)
    assert isinstance(module.settings, Settings)


@pytest.mark.parametrize("logical_id", sorted(REQUIRED))
def test_each_function_fails_at_cold_start_without_what_it_needs(
    logical_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    function = functions()[logical_id]
    for variable in CANDIDATES:
        if variable in REQUIRED[logical_id]:
            with pytest.raises(SettingsError, match=variable):
                cold_start(function, monkeypatch, **{variable: ""})
        else:
            cold_start(function, monkeypatch, **{variable: ""})  # not needed on its path: it starts
