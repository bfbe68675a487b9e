"""`costguard init`: asks the few deploy values with no safe default and writes them into samconfig.toml.

The shipped samconfig.toml sets every template parameter but these (its `default` environment), with
`confirm_changeset`, `capabilities` and `resolve_s3`: after `costguard init`, a plain `sam deploy` asks no
parameter, only to confirm the change set it shows. A question already answered in the file is not asked again
(``--reconfigure`` asks it anyway); its command-line option answers it without asking.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import shlex
import sys
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DEFAULT_CONFIG = Path("samconfig.toml")
SECRET_ARN = re.compile(r"^arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:[0-9]{12}:secret:[A-Za-z0-9/_+=.@-]+$")
REGION = re.compile(r"^[a-z]{2}(-[a-z]+)+-[0-9]{1,2}$")


class InitError(Exception):
    """What stops `costguard init`, in one sentence."""


def _slack(text: str) -> str:
    answer = text.strip().lower()
    kinds = {"webhook": "off", "off": "off", "app": "on", "on": "on"}
    if answer not in kinds:
        raise ValueError("answer webhook or app")
    return kinds[answer]


def _secret_arn(text: str) -> str:
    answer = text.strip()
    if answer and not SECRET_ARN.fullmatch(answer):
        raise ValueError(
            "give a Secrets Manager secret ARN (arn:aws:secretsmanager:<region>:<account>:secret:...)"
        )
    return answer


def _budget(text: str) -> str:
    try:
        amount = float(text.strip() or "0")
    except ValueError:
        raise ValueError("give an amount in USD, such as 5000 (0 for none)") from None
    if not math.isfinite(amount) or amount < 0:
        raise ValueError("give an amount of 0 or more")
    return str(int(amount)) if amount.is_integer() else f"{amount:g}"


def _region(text: str) -> str:
    answer = text.strip()
    if not REGION.fullmatch(answer):
        raise ValueError("give a region name, such as us-east-1")
    return answer


@dataclass(frozen=True)
class Question:
    """One template parameter with no safe default: what to ask, the answer Enter gives, and its check."""

    parameter: str
    prompt: str
    default: str
    parse: Callable[[str], str]
    option: str  # the command-line option that answers it


# What has no safe default, in the order asked. Everything else is set in the shipped samconfig.toml.
QUESTIONS: tuple[Question, ...] = (
    Question(
        "SlackApp",
        "Slack: an incoming webhook, or a Slack app (threads, mentions, buttons; the stack then adds a public "
        "Function URL for the clicks)? webhook or app",
        "webhook",
        _slack,
        "--slack",
    ),
    Question(
        "SlackWebhookSecretArn",
        "ARN of a Secrets Manager secret that already holds the Slack webhook or app credentials "
        "(Enter: the stack creates an empty secret for you to fill)",
        "",
        _secret_arn,
        "--secret-arn",
    ),
    Question(
        "MonthlyGpuBudgetUsd",
        "Monthly GPU budget in USD: the stack creates an AWS Budgets budget that alerts costguard (0: none)",
        "0",
        _budget,
        "--budget",
    ),
)
REGION_QUESTION = Question(
    "region",
    "AWS region to deploy to (none is configured: no AWS_REGION, AWS_DEFAULT_REGION or profile region)",
    "",
    _region,
    "--region",
)


# -- reading samconfig.toml ----------------------------------------------------------------------------


def _load(text: str, path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise InitError(f"{path} is not valid TOML ({error})") from None


def overrides(config: Mapping[str, Any], env: str) -> dict[str, str]:
    """The parameter_overrides of ``env``'s deploy table as the SAM CLI reads them: Name=Value items, a quoted
    value unquoted (``Name="rate(7 days)"``, ``Name=""``)."""
    raw = config.get(env, {}).get("deploy", {}).get("parameters", {}).get("parameter_overrides", [])
    items = shlex.split(raw) if isinstance(raw, str) else [t for item in raw for t in shlex.split(str(item))]
    return dict(item.split("=", 1) for item in items if "=" in item)


def pinned_region(config: Mapping[str, Any], env: str) -> str | None:
    tables = config.get(env, {})
    for command in ("deploy", "global"):
        region = tables.get(command, {}).get("parameters", {}).get("region")
        if region:
            return str(region)
    return None


def configured_region() -> str | None:
    """The region the SAM CLI would deploy to without one in samconfig.toml: the environment's, else the
    profile's (botocore reads both as the AWS CLI does)."""
    found = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    if found:
        return found
    import botocore.session

    region = botocore.session.get_session().get_config_variable("region")
    return str(region) if region else None


def to_ask(
    config: Mapping[str, Any], env: str, answered: Mapping[str, str], *, reconfigure: bool, region: str | None
) -> list[Question]:
    """The questions this run asks: those neither in the file (unless ``reconfigure``) nor answered by an
    option, and the region when nothing gives one."""
    present = overrides(config, env)
    asked = [
        q for q in QUESTIONS if q.parameter not in answered and (reconfigure or q.parameter not in present)
    ]
    if "region" not in answered and not region and not pinned_region(config, env):
        asked.append(REGION_QUESTION)
    return asked


# -- writing it -----------------------------------------------------------------------------------------


def _item(name: str, value: str) -> str:
    """One parameter_overrides item: a value with a space, a quote or nothing at all is quoted for the SAM CLI."""
    if value == "" or re.search(r"[\s\"']", value):
        return "'" + name + '="' + value.replace('"', '\\"') + '"' + "'"
    return f'"{name}={value}"'


def _table(lines: list[str], header: str) -> tuple[int, int] | None:
    """The line range of a TOML table (its header line, and the line the next table starts at)."""
    start = next((i for i, line in enumerate(lines) if line.strip() == header), None)
    if start is None:
        return None
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("[")), len(lines))
    return start, end


def _item_name(line: str) -> str | None:
    text = line.strip().rstrip(",")
    if not text or text.startswith("#"):
        return None
    try:
        value = tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return None
    return str(value).split("=", 1)[0].strip() if isinstance(value, str) else None


def write_answers(text: str, env: str, values: Mapping[str, str], region: str | None = None) -> str:
    """samconfig.toml's text with these parameter values in ``env``'s parameter_overrides (replacing any it
    had) and, when given, its region; everything else (comments, other environments) left as it was."""
    lines = text.splitlines(keepends=True)
    found = _table(lines, f"[{env}.deploy.parameters]")
    if found is None:
        raise InitError(
            f"samconfig.toml has no [{env}.deploy.parameters] table: copy [default]'s tables as {env}"
        )
    start, end = found
    opener = next(
        (i for i in range(start + 1, end) if re.match(r"\s*parameter_overrides\s*=\s*\[\s*$", lines[i])), None
    )
    if opener is None:
        raise InitError(
            f"[{env}.deploy.parameters] has no parameter_overrides = [ ... ] array (one item a line, as shipped)"
        )
    closer = next((i for i in range(opener + 1, end) if lines[i].strip() == "]"), None)
    if closer is None:
        raise InitError(f"[{env}.deploy.parameters]'s parameter_overrides array is not closed by a line ']'")
    body = [line for line in lines[opener + 1 : closer] if _item_name(line) not in values]
    body += [f"    {_item(name, value)},\n" for name, value in values.items()]
    lines[opener + 1 : closer] = body
    if region:
        lines = _with_region(lines, env, region)
    return "".join(lines)


def _with_region(lines: list[str], env: str, region: str) -> list[str]:
    found = _table(lines, f"[{env}.global.parameters]")
    if found is None:
        deploy = _table(lines, f"[{env}.deploy.parameters]")
        assert deploy is not None
        table = [f"[{env}.global.parameters]\n", f'region = "{region}"\n', "\n"]
        return [*lines[: deploy[0]], *table, *lines[deploy[0] :]]
    start, end = found
    for i in range(start + 1, end):
        if re.match(r"\s*region\s*=", lines[i]):
            lines[i] = f'region = "{region}"\n'
            return lines
    lines.insert(start + 1, f'region = "{region}"\n')
    return lines


# -- the command ------------------------------------------------------------------------------------------


def ask(question: Question, read: Callable[[str], str], out: Callable[[str], None]) -> str:
    """Ask until the answer passes its check (Enter takes the default); end of input is an error."""
    shown = f" [{question.default}]" if question.default else ""
    while True:
        try:
            text = read(f"{question.prompt}{shown}: ")
        except (EOFError, KeyboardInterrupt) as stopped:
            out("")  # the prompt's line ends before the error
            how = "input ended" if isinstance(stopped, EOFError) else "interrupted"
            raise InitError(
                f"no answer for {question.parameter} ({how}): nothing was written; give {question.option} to "
                "answer it"
            ) from None
        try:
            return question.parse(text if text.strip() else question.default)
        except ValueError as problem:
            out(f"  {problem}")


def run_init(
    path: Path,
    env: str = "default",
    *,
    answered: Mapping[str, str] | None = None,
    reconfigure: bool = False,
    read: Callable[[str], str] = input,
    out: Callable[[str], None] = print,
    region: str | None = None,
) -> dict[str, str]:
    """Ask what is open, write it into ``path``; the values written (parameters, and ``region`` if asked)."""
    if not path.is_file():
        raise InitError(
            f"{path} not found: run costguard init where samconfig.toml is, or give --config-file"
        )
    text = path.read_text(encoding="utf-8")
    config = _load(text, path)
    given = dict(answered or {})
    questions = to_ask(config, env, given, reconfigure=reconfigure, region=region)
    values = {q.parameter: ask(q, read, out) for q in questions}
    values |= given
    new_region = values.pop("region", None)
    if not values and not new_region:
        return {}
    updated = write_answers(text, env, values, new_region)
    check = overrides(_load(updated, path), env)
    assert all(check.get(k) == v for k, v in values.items()), "samconfig.toml did not take the values"
    partial = path.with_name(path.name + ".partial")
    partial.write_text(updated, encoding="utf-8")
    partial.replace(path)
    return values | ({"region": new_region} if new_region else {})


def _option(question: Question) -> Callable[[str], str]:
    def parse(text: str) -> str:
        try:
            return question.parse(text)
        except ValueError as problem:
            raise argparse.ArgumentTypeError(str(problem)) from None

    parse.__name__ = question.parameter
    return parse


def add_command(commands: Any) -> None:
    """`costguard init`'s parser, under the command line's subcommands."""
    init = commands.add_parser(
        "init", help="ask the few deploy values with no safe default and write them into samconfig.toml"
    )
    init.add_argument("--config-file", default=str(DEFAULT_CONFIG), help="default: ./samconfig.toml")
    init.add_argument("--config-env", default="default", help="the samconfig environment (default: default)")
    init.add_argument("--reconfigure", action="store_true", help="ask again what the file already answers")
    for question in (*QUESTIONS, REGION_QUESTION):
        init.add_argument(
            question.option,
            dest=question.parameter,
            type=_option(question),
            metavar="VALUE",
            help=f"answer without asking ({question.parameter})",
        )
    init.set_defaults(run=cmd_init)


def cmd_init(args: argparse.Namespace, *, read: Callable[[str], str] = input) -> int:
    answered = {
        q.parameter: getattr(args, q.parameter)
        for q in (*QUESTIONS, REGION_QUESTION)
        if getattr(args, q.parameter, None) is not None
    }
    path = Path(args.config_file)
    try:
        written = run_init(
            path,
            args.config_env,
            answered=answered,
            reconfigure=args.reconfigure,
            read=read,
            region=configured_region(),
        )
    except InitError as error:
        print(f"costguard init: {error}", file=sys.stderr)
        return 2
    if written:
        shown = ", ".join(f"{k}={v!r}" if v == "" else f"{k}={v}" for k, v in written.items())
        print(f"costguard init: wrote {shown} into {path} [{args.config_env}]")
    else:
        print(
            f"costguard init: {path} [{args.config_env}] already answers every question (--reconfigure to change)"
        )
    print(
        "Next: sam deploy. It asks nothing but to confirm the change set it shows; it also prints "
        '"InteractionsFunction Function Url has no authentication." (README "Deploy": what that means).'
    )
    return 0
