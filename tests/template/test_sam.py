"""template.yaml and samconfig.toml: validated and built with the SAM CLI, then read for safety properties.

The SAM CLI lives in its own virtual environment (`make setup` creates .venv-sam); these tests fail, rather
than skip, when it is missing. `sam build` needs a python3.13 on PATH (the functions' runtime) and downloads
arm64 wheels from PyPI.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from costguard.local.stack import MAX_RECEIVE_COUNT
from costguard.local.template import Template

pytestmark = pytest.mark.template

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "template.yaml"
SAMCONFIG = ROOT / "samconfig.toml"
# Read at import: the autouse fixture in tests/conftest.py removes COSTGUARD_* variables before a test runs.
SAM_FROM_ENV = os.environ.get("COSTGUARD_SAM")
SAM_TIMEOUT_SECONDS = 1200


# --- helpers --------------------------------------------------------------------------------------


def _sam_binary() -> Path:
    sam = Path(SAM_FROM_ENV) if SAM_FROM_ENV else ROOT / ".venv-sam" / "bin" / "sam"
    if not sam.is_absolute():
        sam = ROOT / sam
    if not (sam.is_file() and os.access(sam, os.X_OK)):
        pytest.fail(
            f"SAM CLI not found at {sam} (COSTGUARD_SAM={SAM_FROM_ENV!r}): "
            "run `make setup` to create .venv-sam",
            pytrace=False,
        )
    return sam


def _python313_dir() -> Path:
    """A directory holding a `python3.13` executable, the interpreter `sam build` uses for the runtime."""
    if sys.version_info[:2] == (3, 13):
        here = Path(sys.executable).parent
        if (here / "python3.13").exists():
            return here
    found = subprocess.run(
        [str(ROOT / "scripts" / "find-python"), "3.13"], capture_output=True, text=True, check=False
    )
    if found.returncode != 0 or not found.stdout.strip():
        pytest.fail(f"sam build needs python3.13 on PATH: {found.stderr.strip()}", pytrace=False)
    return Path(found.stdout.strip()).parent


def _sam_env() -> dict[str, str]:
    env = dict(os.environ)
    env["AWS_DEFAULT_REGION"] = "us-east-1"
    env["SAM_CLI_TELEMETRY"] = "0"
    env["PATH"] = os.pathsep.join([str(_python313_dir()), env.get("PATH", "")])
    return env


def _run_sam(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    command = [str(_sam_binary()), *args]
    try:
        return subprocess.run(
            command,
            cwd=cwd,
            env=_sam_env(),
            capture_output=True,
            text=True,
            timeout=SAM_TIMEOUT_SECONDS,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(
            f"{shlex.join(command)} timed out after {SAM_TIMEOUT_SECONDS}s\n"
            f"--- stdout ---\n{exc.stdout!r}\n--- stderr ---\n{exc.stderr!r}",
            pytrace=False,
        )


def _output(result: subprocess.CompletedProcess[str]) -> str:
    return (
        f"{shlex.join(result.args)} exited {result.returncode}\n"
        f"--- stdout ---\n{result.stdout}\n--- stderr ---\n{result.stderr}"
    )


def _body() -> dict[str, Any]:
    return Template.load(TEMPLATE).body


def _resources_of_type(body: dict[str, Any], resource_type: str) -> dict[str, dict[str, Any]]:
    return {k: v for k, v in body.get("Resources", {}).items() if v.get("Type") == resource_type}


def _functions(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    functions = _resources_of_type(body, "AWS::Serverless::Function")
    assert functions, "template.yaml declares no AWS::Serverless::Function"
    return functions


def _walk(value: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """Every node of a parsed template with a readable path to it."""
    yield path, value
    if isinstance(value, dict):
        for key, child in value.items():
            yield from _walk(child, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            yield from _walk(child, f"{path}[{index}]")


def _strings(value: Any) -> list[str]:
    return [node for _, node in _walk(value) if isinstance(node, str)]


def _refs(value: Any) -> set[str]:
    return {node["Ref"] for _, node in _walk(value) if isinstance(node, dict) and "Ref" in node}


def _environments(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Environment variables by where they are declared: Globals and each function."""
    found: dict[str, dict[str, Any]] = {}
    globals_env = body.get("Globals", {}).get("Function", {}).get("Environment", {}).get("Variables")
    if globals_env:
        found["Globals.Function"] = globals_env
    for logical_id, function in _functions(body).items():
        variables = function.get("Properties", {}).get("Environment", {}).get("Variables")
        if variables:
            found[logical_id] = variables
    return found


def _samconfig() -> dict[str, Any]:
    assert SAMCONFIG.is_file(), f"{SAMCONFIG} is missing"
    with SAMCONFIG.open("rb") as handle:
        return tomllib.load(handle)


def _parameter_overrides(environment: dict[str, Any]) -> dict[str, str]:
    """parameter_overrides of every command section of one samconfig environment, as name -> value."""
    overrides: dict[str, str] = {}
    for section in environment.values():
        raw = section.get("parameters", {}).get("parameter_overrides") if isinstance(section, dict) else None
        if raw is None:
            continue
        # Each item as the SAM CLI reads it: a quoted value unquoted (Name="rate(7 days)", Name="").
        items = shlex.split(raw) if isinstance(raw, str) else [t for item in raw for t in shlex.split(item)]
        for item in items:
            name, sep, value = item.partition("=")
            assert sep, f"parameter override {item!r} is not Name=Value"
            overrides[name] = value
    return overrides


def _check_parameter_value(name: str, value: str, spec: dict[str, Any]) -> list[str]:
    problems = []
    allowed = spec.get("AllowedValues")
    if allowed is not None and value not in {str(v) for v in allowed}:
        problems.append(f"{name}={value!r} is not one of {allowed}")
    if spec.get("Type") == "Number":
        try:
            number = float(value)
        except ValueError:
            return [f"{name}={value!r} is not a number"]
        if "MinValue" in spec and number < float(spec["MinValue"]):
            problems.append(f"{name}={value} is below MinValue {spec['MinValue']}")
        if "MaxValue" in spec and number > float(spec["MaxValue"]):
            problems.append(f"{name}={value} is above MaxValue {spec['MaxValue']}")
    if "MinLength" in spec and len(value) < int(spec["MinLength"]):
        problems.append(f"{name}={value!r} is shorter than MinLength {spec['MinLength']}")
    return problems


# --- the SAM CLI ----------------------------------------------------------------------------------


def test_template_validates_with_lint(tmp_path: Path) -> None:
    result = _run_sam("validate", "--lint", "--template", str(TEMPLATE), cwd=tmp_path)
    assert result.returncode == 0, _output(result)


@pytest.mark.xdist_group("sam_build")
def test_sam_build_produces_layer_and_functions(tmp_path: Path) -> None:
    build = tmp_path / "build"
    # samconfig.toml turns the cache on: a test builds from scratch, and cwd keeps files out of the repo.
    result = _run_sam(
        "build",
        "--template",
        str(TEMPLATE),
        "--build-dir",
        str(build),
        "--base-dir",
        str(ROOT),
        "--no-cached",
        cwd=tmp_path,
    )
    assert result.returncode == 0, _output(result)
    context = f"\n{_output(result)}"

    layer = build / "CostguardLayer" / "python"
    assert (layer / "costguard" / "__init__.py").is_file(), f"costguard package missing from {layer}{context}"
    arm_modules = sorted((layer / "pydantic_core").glob("*aarch64*.so"))
    assert arm_modules, f"no aarch64 pydantic_core extension in {layer / 'pydantic_core'}{context}"
    x86_modules = sorted(str(p.relative_to(layer)) for p in layer.rglob("*x86_64*.so"))
    assert not x86_modules, f"x86_64 extensions in an arm64 layer: {x86_modules}{context}"

    for logical_id, function in _functions(_body()).items():
        handler = function.get("Properties", {}).get("Handler", "app.lambda_handler")
        module = handler.rsplit(".", 1)[0].replace(".", "/") + ".py"
        built = build / logical_id / module
        assert built.is_file(), f"{logical_id}: {built} was not built{context}"

    assert (build / "template.yaml").is_file(), f"no built template in {build}{context}"


# --- samconfig.toml -------------------------------------------------------------------------------


def test_samconfig_environments() -> None:
    config = _samconfig()
    assert config.get("version") == 0.1
    assert {"default", "prod"} <= config.keys(), (
        f"environments: {sorted(k for k in config if k != 'version')}"
    )

    parameters = _body()["Parameters"]
    expected_stacks = {"default": "costguard", "prod": "costguard-prod"}
    problems: list[str] = []
    for env_name in ("default", "prod"):
        environment = config[env_name]
        # Environments do not inherit from `default`: each one must be deployable on its own.
        merged: dict[str, Any] = {}
        for command in ("global", "deploy"):
            merged.update(environment.get(command, {}).get("parameters", {}))
        assert merged.get("stack_name") == expected_stacks[env_name], f"[{env_name}] stack_name"
        # No region pinned: the deployer's AWS configuration (or --region) chooses it.
        assert "region" not in merged and "region" not in environment.get("deploy", {}).get(
            "parameters", {}
        ), f"[{env_name}] pins a region"
        assert merged.get("capabilities") == "CAPABILITY_IAM", f"[{env_name}] capabilities"
        assert merged.get("resolve_s3") is True, f"[{env_name}] resolve_s3"
        assert environment.get("validate", {}).get("parameters", {}).get("lint") is True, f"[{env_name}] lint"

        overrides = _parameter_overrides(environment)
        assert overrides, f"[{env_name}] has no parameter_overrides"
        for name, value in overrides.items():
            if name not in parameters:
                problems.append(f"[{env_name}] overrides {name}, which template.yaml does not declare")
                continue
            problems.extend(
                f"[{env_name}] {p}" for p in _check_parameter_value(name, value, parameters[name])
            )

    assert not problems, "\n".join(problems)
    assert _parameter_overrides(config["default"]).get("Mode") == "notify"
    prod = _parameter_overrides(config["prod"])
    assert prod.get("Mode") == "remediate"
    assert prod.get("SlackWebhookSecretArn", "").startswith("arn:aws:secretsmanager:")


# --- template properties --------------------------------------------------------------------------


def test_every_function_logs_to_its_own_group_with_retention() -> None:
    body = _body()
    log_groups = _resources_of_type(body, "AWS::Logs::LogGroup")
    problems = []
    for logical_id, function in _functions(body).items():
        ref = (function.get("Properties", {}).get("LoggingConfig") or {}).get("LogGroup")
        group_id = ref.get("Ref") if isinstance(ref, dict) else None
        if group_id not in log_groups:
            problems.append(f"{logical_id}: LoggingConfig.LogGroup must !Ref a log group of the stack")
            continue
        props = log_groups[group_id].get("Properties", {})
        if props.get("RetentionInDays") in (None, ""):
            problems.append(f"{logical_id}: log group {group_id} has no RetentionInDays")
        name = props.get("LogGroupName")
        if not (
            isinstance(name, dict)
            and str(name.get("Fn::Sub", "")).startswith("/aws/lambda/${AWS::StackName}-")
        ):
            problems.append(
                f"{logical_id}: log group {group_id} must have a fixed name under the stack's prefix"
            )
    assert not problems, "\n".join(problems)


def test_event_sourced_functions_keep_failures() -> None:
    body = _body()
    problems = []
    sqs_sourced = []
    for logical_id, function in _functions(body).items():
        props = function.get("Properties", {})
        events = props.get("Events") or {}
        rules = {name: e for name, e in events.items() if e.get("Type") == "EventBridgeRule"}
        if rules:
            on_failure = props.get("EventInvokeConfig", {}).get("DestinationConfig", {}).get("OnFailure")
            if not (on_failure and on_failure.get("Destination")):
                problems.append(f"{logical_id}: EventInvokeConfig.DestinationConfig.OnFailure is not set")
            for name, event in rules.items():
                dead_letter = event.get("Properties", {}).get("DeadLetterConfig")
                if not dead_letter:
                    problems.append(f"{logical_id}.Events.{name}: the rule has no DeadLetterConfig")
        for name, event in events.items():
            if event.get("Type") != "SQS":
                continue
            sqs_sourced.append(logical_id)
            response_types = event.get("Properties", {}).get("FunctionResponseTypes")
            if response_types != ["ReportBatchItemFailures"]:
                problems.append(
                    f"{logical_id}.Events.{name}: FunctionResponseTypes is {response_types!r}, "
                    "not [ReportBatchItemFailures]"
                )
    assert sqs_sourced, "no function is sourced from SQS"

    for logical in ("DecisionsQueue", "UrgentDecisionsQueue"):
        queue = body["Resources"].get(logical, {})
        redrive = queue.get("Properties", {}).get("RedrivePolicy") or {}
        if redrive.get("deadLetterTargetArn") != {"Fn::GetAtt": ["DecisionsDeadLetterQueue", "Arn"]}:
            problems.append(f"{logical}: RedrivePolicy does not target DecisionsDeadLetterQueue: {redrive!r}")
        if redrive.get("maxReceiveCount") != MAX_RECEIVE_COUNT:
            problems.append(f"{logical}: maxReceiveCount is not the local stack's {MAX_RECEIVE_COUNT}")
    assert not problems, "\n".join(problems)


def test_an_sqs_batch_of_more_than_ten_has_a_batching_window_of_at_least_a_second() -> None:
    """Lambda refuses an SQS event source whose BatchSize is over 10 without MaximumBatchingWindowInSeconds of at
    least 1: a parameter giving the window must not allow 0."""
    body = _body()
    parameters = body.get("Parameters", {})
    checked = []
    for logical_id, function in _functions(body).items():
        for name, event in (function.get("Properties", {}).get("Events") or {}).items():
            props = event.get("Properties", {})
            if event.get("Type") != "SQS" or int(props.get("BatchSize", 10)) <= 10:
                continue
            window = props.get("MaximumBatchingWindowInSeconds", 0)
            if isinstance(window, dict) and "Ref" in window:
                window = parameters[window["Ref"]].get("MinValue", 0)
            assert int(window) >= 1, (
                f"{logical_id}.Events.{name}: batch over 10 with a window that may be {window}"
            )
            checked.append(f"{logical_id}.{name}")
    assert {"NotifierFunction.Decisions", "NotifierFunction.UrgentDecisions"} <= set(checked), checked


def test_no_secret_in_plain_environment() -> None:
    body = _body()
    environments = _environments(body)
    problems = [
        f"{where}.{name} holds a Slack webhook URL"
        for where, variables in environments.items()
        for name, value in variables.items()
        if any("hooks.slack.com" in s for s in _strings(value))
    ]
    problems += [
        f"Parameters.{name}.Default holds a Slack webhook URL"
        for name, spec in body.get("Parameters", {}).items()
        if "hooks.slack.com" in str(spec.get("Default", ""))
    ]

    secret_ids = {
        where: variables["COSTGUARD_SLACK_SECRET_ID"]
        for where, variables in environments.items()
        if "COSTGUARD_SLACK_SECRET_ID" in variables
    }
    assert secret_ids, "no function environment sets COSTGUARD_SLACK_SECRET_ID"
    resources = body.get("Resources", {})
    parameters = body.get("Parameters", {})
    for where, value in secret_ids.items():
        refs = _refs(value)
        if not refs:
            problems.append(f"{where}.COSTGUARD_SLACK_SECRET_ID is a literal {value!r}, not a reference")
        for ref in refs:
            if ref in resources:
                if resources[ref].get("Type") != "AWS::SecretsManager::Secret":
                    problems.append(
                        f"{where}.COSTGUARD_SLACK_SECRET_ID refers to {ref}, which is not a secret"
                    )
            elif ref in parameters:
                if not ref.endswith("SecretArn"):
                    problems.append(
                        f"{where}.COSTGUARD_SLACK_SECRET_ID refers to parameter {ref}, not a secret ARN"
                    )
            else:
                problems.append(f"{where}.COSTGUARD_SLACK_SECRET_ID refers to unknown {ref}")
    assert not problems, "\n".join(problems)


def test_no_wildcard_actions() -> None:
    body = _body()
    problems = []
    statements_seen = 0
    for path, node in _walk(body):
        if not (isinstance(node, dict) and "Statement" in node):
            continue
        statements = node["Statement"] if isinstance(node["Statement"], list) else [node["Statement"]]
        for index, statement in enumerate(statements):
            statements_seen += 1
            if not isinstance(statement, dict):
                continue
            if statement.get("Effect") == "Deny" and "Action" in statement:
                continue  # a wider Deny refuses more (TlsOnly denies s3:* over plain HTTP)
            for key in ("Action", "NotAction"):
                actions = statement.get(key)
                if actions is None:
                    continue
                wildcards = [a for a in _strings(actions) if "*" in a]
                if wildcards:
                    problems.append(f"{path}.Statement[{index}].{key}: {wildcards}")
    assert statements_seen, "found no IAM policy statements in template.yaml"
    assert not problems, "wildcard actions:\n" + "\n".join(problems)


def test_the_urgent_queue_takes_notices_only_from_the_functions_allowed_to_send_them() -> None:
    """A forged stop notice would be posted to Slack: as on the decisions queue, any sender but costguard's own
    function roles is denied sqs:SendMessage on the urgent queue, and each function whose role may send to it is
    one of those roles."""
    resources = _body()["Resources"]
    [deny] = [
        s
        for s in resources["UrgentDecisionsQueuePolicy"]["Properties"]["PolicyDocument"]["Statement"]
        if s["Effect"] == "Deny"
    ]
    assert deny["Principal"] == "*" and deny["Action"] == "sqs:SendMessage"
    assert deny["Resource"] == {"Fn::GetAtt": ["UrgentDecisionsQueue", "Arn"]}
    assert deny["Condition"]["Bool"] == {"aws:PrincipalIsAWSService": "false"}
    allowed = set()
    for entry in deny["Condition"]["ArnNotEquals"]["aws:PrincipalArn"]:
        role = entry["Fn::If"][1] if "Fn::If" in entry else entry
        allowed.add(role["Fn::GetAtt"][0].removesuffix("Role"))
    target = {"Fn::GetAtt": ["UrgentDecisionsQueue", "Arn"]}
    senders = set()
    for logical_id, function in _functions(_body()).items():
        for policy in function.get("Properties", {}).get("Policies") or []:
            for statement in policy.get("Statement", []) if isinstance(policy, dict) else []:
                resource = statement.get("Resource")
                targets = resource if isinstance(resource, list) else [resource]
                if statement.get("Action") == "sqs:SendMessage" and target in targets:
                    senders.add(logical_id)
    assert senders and senders <= allowed, senders - allowed
    assert "NotifierFunction" not in allowed
