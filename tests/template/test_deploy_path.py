"""The deploy path: README's one deploy command (`costguard init && sam deploy`) asks at most five questions, and a
webhook install (no Slack app) has no public endpoint: no AWS::Lambda::Url after the SAM transform.

samconfig.toml and the template are read by the SAM CLI's own code (.venv-sam): its parameter_overrides parser,
and samtranslator's transform, which turns FunctionUrlConfig into AWS::Lambda::Url. `sam validate --lint` and
`sam build` of this same template (the Function URL under its condition) run in test_sam.py.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from costguard.local.template import Template
from costguard.ops.samconfig import QUESTIONS, REGION_QUESTION, run_init
from tests.template.test_sam import _sam_binary

pytestmark = pytest.mark.template

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "template.yaml"
SAMCONFIG = ROOT / "samconfig.toml"
README = ROOT / "README.md"
MOST_QUESTIONS = 5

# The SAM CLI's reading of one samconfig environment: `sam deploy`'s parameter overrides, and its other settings.
READ_SAMCONFIG = """
import json, sys
from pathlib import Path
from samcli.cli.types import CfnParameterOverridesType
from samcli.lib.config.samconfig import SamConfig
path, env = Path(sys.argv[1]), sys.argv[2]
deploy = SamConfig(str(path.parent), filename=path.name).get_all(["deploy"], "parameters", env=env)
overrides = CfnParameterOverridesType().convert(deploy.get("parameter_overrides", []), None, None)
settings = {k: (v if isinstance(v, bool) else str(v)) for k, v in deploy.items() if k != "parameter_overrides"}
print(json.dumps({"overrides": overrides, "settings": settings}))
"""

# The template as CloudFormation receives it after the SAM transform (code locations made S3 URIs, which is all
# `sam deploy` changes first), as JSON.
TRANSFORM = """
import json, sys
from samcli.yamlhelper import yaml_parse
from samtranslator.translator.transform import transform
body = yaml_parse(open(sys.argv[1]).read())
for resource in body["Resources"].values():
    for key in ("CodeUri", "ContentUri", "DefinitionUri"):
        if key in resource.get("Properties", {}):
            resource["Properties"][key] = "s3://bucket/key"
class NoManagedPolicies:
    def load(self):
        return {}
print(json.dumps(transform(body, {}, NoManagedPolicies())))
"""


def _sam_python(code: str, *args: str) -> Any:
    python = _sam_binary().parent / "python"
    # samtranslator fills the pseudo parameters from a region (and needs nothing else from AWS).
    env = {**os.environ, "AWS_DEFAULT_REGION": "us-east-1", "SAM_CLI_TELEMETRY": "0"}
    ran = subprocess.run(
        [str(python), "-c", code, *args], capture_output=True, text=True, timeout=300, check=False, env=env
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    return json.loads(ran.stdout)


def _samconfig(path: Path, env: str = "default") -> tuple[dict[str, str], dict[str, Any]]:
    read = _sam_python(READ_SAMCONFIG, str(path), env)
    return read["overrides"], read["settings"]


def _parameters() -> set[str]:
    return set(Template.load(TEMPLATE).body["Parameters"])


# --- the questions ------------------------------------------------------------------------------------------


def test_the_readme_deploy_step_is_init_then_a_plain_sam_deploy() -> None:
    section = README.read_text().split("\n## Deploy\n", 1)[1].split("\n## ", 1)[0]
    commands = re.findall(r"```bash\n(.*?)```", section, flags=re.DOTALL)[0]
    [deploy] = [line for line in commands.splitlines() if "sam deploy" in line]
    assert re.search(r"costguard init && \S*sam deploy(\s|$)", deploy), deploy
    assert "--guided" not in commands


def test_the_deploy_command_asks_at_most_five_questions(tmp_path: Path) -> None:
    overrides, settings = _samconfig(SAMCONFIG)
    # What samconfig.toml leaves without a value is what `costguard init` asks; `sam deploy` then asks none.
    left_open = _parameters() - set(overrides)
    assert left_open == {q.parameter for q in QUESTIONS}
    # `sam deploy` without --guided: the IAM capability and the artifact bucket come from the file; its one
    # question is the change set's confirmation.
    assert settings["capabilities"] == "CAPABILITY_IAM" and settings["resolve_s3"] is True
    sam_questions = 1 if settings.get("confirm_changeset") else 0
    # No region is pinned: init asks for one only where the AWS configuration gives none.
    region_question = 0 if "region" in settings else 1
    assert len(left_open) + region_question + sam_questions <= MOST_QUESTIONS

    # Played on a copy: with no region configured anywhere, init asks exactly those, once.
    config = tmp_path / "samconfig.toml"
    shutil.copy(SAMCONFIG, config)
    asked: list[str] = []
    answers = iter(["app", "", "5000", "eu-west-1"])

    def read(prompt: str) -> str:
        asked.append(prompt)
        return next(answers)

    written = run_init(config, read=read, out=lambda _: None, region=None)
    assert len(asked) == len(left_open) + region_question
    assert [p.split(":")[0] for p in asked] == [q.prompt.split(":")[0] for q in (*QUESTIONS, REGION_QUESTION)]
    assert written == {
        "SlackApp": "on",
        "SlackWebhookSecretArn": "",
        "MonthlyGpuBudgetUsd": "5000",
        "region": "eu-west-1",
    }
    overrides, settings = _samconfig(config)
    assert set(overrides) == _parameters(), "sam deploy finds every parameter's value in the file"
    assert overrides["SlackApp"] == "on" and overrides["SlackWebhookSecretArn"] == ""
    assert settings["region"] == "eu-west-1"
    assert run_init(config, read=read, out=lambda _: None, region=None) == {}
    assert len(asked) == len(left_open) + region_question, "a second run asks nothing"


# --- no Slack app, no public endpoint -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def transformed() -> dict[str, Any]:
    body: dict[str, Any] = _sam_python(TRANSFORM, str(TEMPLATE))
    return body


def _deployed(transformed: dict[str, Any], slack_app: str) -> dict[str, dict[str, Any]]:
    """The resources a stack deployed with the shipped samconfig.toml and ``SlackApp`` creates."""
    overrides, _ = _samconfig(SAMCONFIG)
    conditions = Template(TEMPLATE, transformed).conditions({**overrides, "SlackApp": slack_app})
    return {
        name: resource
        for name, resource in transformed["Resources"].items()
        if conditions.get(resource.get("Condition", ""), True)
    }


def test_a_webhook_install_has_no_function_url(transformed: dict[str, Any]) -> None:
    urls = {n: r for n, r in transformed["Resources"].items() if r["Type"] == "AWS::Lambda::Url"}
    assert (
        set(urls) == {"InteractionsFunctionUrl"}
        and urls["InteractionsFunctionUrl"]["Condition"] == "SlackAppOn"
    )
    webhook = _deployed(transformed, "off")
    public = [
        n
        for n, r in webhook.items()
        if r["Type"] == "AWS::Lambda::Url"
        or (r["Type"] == "AWS::Lambda::Permission" and "FunctionUrlAuthType" in r.get("Properties", {}))
    ]
    assert not public, f"a webhook install makes {public} public"
    assert not [n for n in webhook if n.startswith("Interaction")]
    app = _deployed(transformed, "on")
    assert app["InteractionsFunctionUrl"]["Properties"]["AuthType"] == "NONE"
    assert {"InteractionsFunction", "InteractionActionsFunction", "InteractionsQueue"} <= set(app)


def test_every_function_with_a_url_exists_only_with_a_slack_app() -> None:
    body = Template.load(TEMPLATE).body
    defaults = Template.load(TEMPLATE).conditions()
    with_url = {
        n: r
        for n, r in body["Resources"].items()
        if r["Type"] == "AWS::Serverless::Function" and "FunctionUrlConfig" in r["Properties"]
    }
    assert with_url
    for name, resource in with_url.items():
        assert resource.get("Condition") == "SlackAppOn", name
        assert defaults["SlackAppOn"] is False


def _references(value: Any, guarded: frozenset[str] = frozenset()) -> list[tuple[str, frozenset[str]]]:
    """Each resource a value names (Ref, GetAtt, ${...} in Sub), with the conditions of the Fn::If branches
    it sits in."""
    found: list[tuple[str, frozenset[str]]] = []
    if isinstance(value, dict):
        if set(value) == {"Fn::If"}:
            condition, yes, no = value["Fn::If"]
            return _references(yes, guarded | {condition}) + _references(no, guarded)
        for key, child in value.items():
            if key == "Ref":
                found.append((str(child), guarded))
            elif key == "Fn::GetAtt":
                found.append((child[0] if isinstance(child, list) else str(child).split(".")[0], guarded))
            elif key == "Fn::Sub":
                text = child if isinstance(child, str) else child[0]
                found += [(m.split(".")[0], guarded) for m in re.findall(r"\$\{([^}!]+)\}", text)]
                found += _references(child[1] if isinstance(child, list) else None, guarded)
            else:
                found += _references(child, guarded)
    elif isinstance(value, list):
        for child in value:
            found += _references(child, guarded)
    return found


def test_nothing_outside_the_slack_app_names_its_resources_unguarded() -> None:
    body = Template.load(TEMPLATE).body
    resources = body["Resources"]
    conditional = {n for n, r in resources.items() if r.get("Condition") == "SlackAppOn"}
    conditional |= {f"{n}Role" for n in conditional if resources[n]["Type"] == "AWS::Serverless::Function"}
    conditional |= {
        f"{n}Url" for n in conditional if "FunctionUrlConfig" in resources.get(n, {}).get("Properties", {})
    }
    assert {
        "InteractionsQueue",
        "InteractionsDeadLetterQueue",
        "InteractionActionsFunctionRole",
    } <= conditional
    problems = []
    holders = [*resources.items(), *(("Outputs." + n, o) for n, o in body.get("Outputs", {}).items())]
    for name, holder in holders:
        if holder.get("Condition") == "SlackAppOn":
            continue
        for target, guarded in _references(holder):
            if target in conditional and "SlackAppOn" not in guarded:
                problems.append(f"{name} names {target}, which exists only with SlackApp=on")
    assert not problems, "\n".join(problems)
