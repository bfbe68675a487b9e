"""ReasonModes and RemediateScope reach every function, and CloudFormation refuses what the settings would refuse
at cold start (and takes what they take)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from costguard.local.template import Template
from costguard.policy import PolicyError, parse_reason_modes, parse_scope

pytestmark = pytest.mark.template

TEMPLATE = Path(__file__).resolve().parents[2] / "template.yaml"


def _body() -> dict[str, object]:
    body: dict[str, object] = Template.load(TEMPLATE).body
    return body


def test_every_function_reads_both_from_the_globals() -> None:
    variables = Template.load(TEMPLATE).global_environment()
    assert variables["COSTGUARD_REASON_MODES"] == {"Ref": "ReasonModes"}
    assert variables["COSTGUARD_REMEDIATE_SCOPE"] == {"Ref": "RemediateScope"}


@pytest.mark.parametrize(
    ("name", "parse", "good", "bad"),
    [
        (
            "ReasonModes",
            parse_reason_modes,
            ["", "gpu_idle=remediate", "gpu_idle=remediate, notebook_idle=notify", "budget_breach = notify"],
            ["gpu_idle", "gpu_idle=stop", "gpu_idle=remediate,", "=notify"],
        ),
        (
            "RemediateScope",
            parse_scope,
            ["", "team!=research", "team=vision|nlp", "team!=research,env=prod", "cost center=ml team"],
            ["team", "team=", "=vision", "team=a=b", "team!=", "team=vision|"],
        ),
    ],
)
def test_the_parameter_pattern_agrees_with_the_settings(
    name: str, parse: object, good: list[str], bad: list[str]
) -> None:
    parameter = _body()["Parameters"][name]  # type: ignore[index]
    assert parameter["Default"] == ""
    pattern = re.compile(parameter["AllowedPattern"])
    assert callable(parse)
    for value in good:
        assert pattern.fullmatch(value), value
        parse(value)
    for value in bad:
        assert not pattern.fullmatch(value), value
        if value.endswith(","):
            continue  # a trailing comma reads as nothing more: only the pattern is strict about it
        with pytest.raises(PolicyError):
            parse(value)
