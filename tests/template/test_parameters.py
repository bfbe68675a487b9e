"""Set up in one sitting: the template's parameters grouped with the essentials first, and samconfig.toml's
default environment, the template's defaults and docs/configuration.md's Configuration table saying the same
thing."""

from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import Path
from typing import Any

import pytest

from costguard.local.template import Template

pytestmark = pytest.mark.template

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "template.yaml"
SAMCONFIG = ROOT / "samconfig.toml"
CONFIGURATION = ROOT / "docs" / "configuration.md"

# What a first deploy must decide, in the console's and `sam deploy --guided`'s first group, in this order.
ESSENTIALS = [
    "Mode",
    "SlackWebhookSecretArn",
    "SlackApp",
    "ProtectTagKey",
    "MonthlyGpuBudgetUsd",
    "GraceMinutes",
]

# samconfig.toml's `default` environment overrides a parameter with a value other than the template's default
# only for a reason written here (none today: `sam deploy` with the default environment deploys the defaults).
DEFAULT_ENV_EXCEPTIONS: dict[str, str] = {}

# The `prod` example differs from the defaults on purpose, and only in these.
PROD_DIFFERENCES: dict[str, str] = {
    "Mode": "prod remediates (marks and stops) instead of only reporting",
    "SlackWebhookSecretArn": "prod uses an existing secret instead of one the stack creates empty",
    "GraceMinutes": "a longer warning between mark and stop where stops really happen",
    "MaxStopsPerRun": "fewer stops per invocation where stops really happen",
    "LogRetentionDays": "production logs are kept longer",
}


def _body() -> dict[str, Any]:
    return Template.load(TEMPLATE).body


def _interface() -> dict[str, Any]:
    interface = _body().get("Metadata", {}).get("AWS::CloudFormation::Interface")
    assert isinstance(interface, dict), "template.yaml has no Metadata AWS::CloudFormation::Interface"
    return interface


def _groups() -> list[tuple[str, list[str]]]:
    groups = _interface().get("ParameterGroups")
    assert isinstance(groups, list) and groups, "AWS::CloudFormation::Interface has no ParameterGroups"
    return [(group["Label"]["default"], list(group["Parameters"])) for group in groups]


def _overrides(environment: str) -> dict[str, str]:
    with SAMCONFIG.open("rb") as handle:
        config = tomllib.load(handle)
    raw = config[environment]["deploy"]["parameters"]["parameter_overrides"]
    # Each item as the SAM CLI reads it: Name=Value, a quoted value unquoted (Name="rate(7 days)", Name="").
    items = (
        shlex.split(raw) if isinstance(raw, str) else [token for item in raw for token in shlex.split(item)]
    )
    return dict(item.split("=", 1) for item in items)


def _same(value: str, default: Any, spec: dict[str, Any]) -> bool:
    if spec.get("Type") == "Number":
        return float(value) == float(default)
    return value == str(default)


# --- parameter groups -----------------------------------------------------------------------------------


def test_every_parameter_is_in_exactly_one_group() -> None:
    parameters = set(_body()["Parameters"])
    seen: dict[str, list[str]] = {}
    for label, members in _groups():
        for name in members:
            seen.setdefault(name, []).append(label)
    twice = {name: labels for name, labels in seen.items() if len(labels) > 1}
    assert not twice, f"parameters in more than one group: {twice}"
    assert not seen.keys() - parameters, (
        f"groups name undeclared parameters: {sorted(seen.keys() - parameters)}"
    )
    assert not parameters - seen.keys(), f"parameters in no group: {sorted(parameters - seen.keys())}"


def test_the_first_group_holds_the_essentials() -> None:
    label, members = _groups()[0]
    assert label == "Essentials"
    assert members == ESSENTIALS


def test_group_labels_are_unique_and_every_parameter_has_a_label() -> None:
    labels = [label for label, _ in _groups()]
    assert len(labels) == len(set(labels)), f"repeated group labels: {labels}"
    parameter_labels = _interface().get("ParameterLabels", {})
    parameters = set(_body()["Parameters"])
    assert set(parameter_labels) == parameters, (
        f"no label: {sorted(parameters - set(parameter_labels))}; "
        f"label of no parameter: {sorted(set(parameter_labels) - parameters)}"
    )
    for name, label in parameter_labels.items():
        text = label.get("default") if isinstance(label, dict) else None
        assert isinstance(text, str) and text.strip(), f"{name}: a label is {{default: text}}"


# --- samconfig.toml, the template and docs/configuration.md agree -------------------------------------------


def test_the_default_environment_deploys_the_documented_defaults() -> None:
    parameters = _body()["Parameters"]
    overrides = _overrides("default")
    problems = []
    for name, value in overrides.items():
        spec = parameters[name]
        if name in DEFAULT_ENV_EXCEPTIONS:
            assert not _same(value, spec.get("Default"), spec), f"{name}: listed as an exception, but equal"
            continue
        if not _same(value, spec.get("Default"), spec):
            problems.append(f"{name}={value}, but the template's default is {spec.get('Default')!r}")
    assert not problems, "samconfig.toml [default] differs from template.yaml:\n" + "\n".join(problems)
    # The secret is left out so the stack creates one to fill (the documented default, "created empty").
    assert "SlackWebhookSecretArn" not in overrides


def test_prod_differs_from_the_defaults_only_where_it_says_why() -> None:
    parameters = _body()["Parameters"]
    prod = _overrides("prod")
    different = {
        name
        for name, value in prod.items()
        if not _same(value, parameters[name].get("Default"), parameters[name])
    }
    assert different == set(PROD_DIFFERENCES), (
        f"undocumented: {sorted(different - set(PROD_DIFFERENCES))}; "
        f"listed but equal to the default: {sorted(set(PROD_DIFFERENCES) - different)}"
    )


def _readme_defaults() -> dict[str, str]:
    """docs/configuration.md's Configuration table: parameter -> its Default cell."""
    text = CONFIGURATION.read_text()
    section = text.split("## Configuration", 1)[1].split("\n## ", 1)[0]
    found: dict[str, str] = {}
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) >= 4 and (match := re.fullmatch(r"`([A-Za-z0-9]+)`", cells[0])):
            found[match.group(1)] = cells[2]
    return found


def test_readme_configuration_table_names_every_parameter_with_its_default() -> None:
    parameters = _body()["Parameters"]
    documented = _readme_defaults()
    assert not parameters.keys() - documented.keys(), (
        f"docs/configuration.md's Configuration table misses {sorted(parameters.keys() - documented.keys())}"
    )
    assert not documented.keys() - parameters.keys(), (
        f"docs/configuration.md documents parameters template.yaml lacks: {sorted(documented.keys() - parameters.keys())}"
    )
    problems = []
    for name, cell in documented.items():
        spec = parameters[name]
        default = spec.get("Default")
        # A literal cell (`notify`, 15, 0.8, "0 (none)") must equal the default; a described one ("created
        # empty", "none", "the stack's region") stands for an empty or long default.
        literal = re.fullmatch(r"`([^`]*)`|(-?[0-9.]+)(?: \(.*\))?", cell)
        if literal is None:
            if name == "CapacityStateNotices" and cell == "all seven states":
                if len(str(default).split(",")) != 7:
                    problems.append(
                        f"{name}: docs/configuration.md says all seven states, the default is {default!r}"
                    )
            elif str(default) != "":
                problems.append(
                    f"{name}: docs/configuration.md says {cell!r}, the template's default is {default!r}"
                )
            continue
        value = literal.group(1) if literal.group(1) is not None else literal.group(2)
        if not _same(value, default, spec):
            problems.append(
                f"{name}: docs/configuration.md says {value!r}, the template's default is {default!r}"
            )
    assert not problems, "\n".join(problems)


def test_who_may_click_is_a_parameter_its_pattern_agrees_with_the_worker() -> None:
    """SlackClickers reaches the interaction worker; CloudFormation refuses what the worker would refuse."""
    from costguard.interact.authorize import AllowedError, parse_allowed

    body = Template.load(TEMPLATE).body
    parameter = body["Parameters"]["SlackClickers"]
    worker = body["Resources"]["InteractionActionsFunction"]["Properties"]["Environment"]["Variables"]
    assert worker["COSTGUARD_SLACK_ALLOWED"] == {"Ref": "SlackClickers"}
    pattern = re.compile(parameter["AllowedPattern"])
    for good in (
        "channel",
        "owner",
        "usergroups:S0123ABCD",
        "owner+usergroups:S0123,S0456",
        parameter["Default"],
    ):
        assert pattern.fullmatch(good), good
        parse_allowed(good)
    for bad in ("everyone", "owner+", "usergroups:", "usergroups:U0123", "channel owner"):
        assert not pattern.fullmatch(bad), bad
        with pytest.raises(AllowedError):
            parse_allowed(bad)
