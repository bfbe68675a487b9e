"""`costguard init`: the few questions, asked until answered well, written into samconfig.toml without touching
anything else in it."""

from __future__ import annotations

import shutil
import tomllib
from pathlib import Path

import pytest

from costguard.cli import main
from costguard.ops.samconfig import InitError, overrides, run_init, write_answers
from tests.conftest import ROOT

SAMCONFIG = ROOT / "samconfig.toml"


@pytest.fixture
def config(tmp_path: Path) -> Path:
    copy = tmp_path / "samconfig.toml"
    shutil.copy(SAMCONFIG, copy)
    return copy


def _never(prompt: str) -> str:
    raise AssertionError(f"asked {prompt!r}")


def test_the_answers_join_the_default_environment_and_nothing_else_changes() -> None:
    text = SAMCONFIG.read_text()
    written = write_answers(
        text, "default", {"SlackApp": "on", "SlackWebhookSecretArn": "", "MonthlyGpuBudgetUsd": "5000"}
    )
    added = set(written.splitlines()) - set(text.splitlines())
    assert added == {
        '    "SlackApp=on",',
        "    'SlackWebhookSecretArn=\"\"',",
        '    "MonthlyGpuBudgetUsd=5000",',
    }
    assert set(text.splitlines()) <= set(written.splitlines()), "comments and other environments kept"
    parsed = tomllib.loads(written)
    assert overrides(parsed, "default")["SlackWebhookSecretArn"] == ""
    assert overrides(parsed, "prod") == overrides(tomllib.loads(text), "prod")
    # Written again, an answer replaces the one before it.
    again = write_answers(written, "default", {"MonthlyGpuBudgetUsd": "0"})
    assert (
        again.count("MonthlyGpuBudgetUsd=") == 1
        and overrides(tomllib.loads(again), "default")["MonthlyGpuBudgetUsd"] == "0"
    )


def test_a_region_goes_into_the_environments_global_table() -> None:
    written = write_answers(SAMCONFIG.read_text(), "default", {}, region="eu-west-1")
    assert tomllib.loads(written)["default"]["global"]["parameters"] == {
        "stack_name": "costguard",
        "region": "eu-west-1",
    }


def test_an_environment_samconfig_lacks_is_named() -> None:
    with pytest.raises(InitError, match=r"no \[staging.deploy.parameters\]"):
        write_answers(SAMCONFIG.read_text(), "staging", {"SlackApp": "on"})


def test_a_bad_answer_is_asked_again_saying_why(config: Path) -> None:
    answers = iter(["slack", "app", "arn:aws:iam::123456789012:role/x", "", "-5", "12.5"])
    said: list[str] = []
    written = run_init(config, read=lambda _: next(answers), out=said.append, region="us-east-1")
    assert written == {"SlackApp": "on", "SlackWebhookSecretArn": "", "MonthlyGpuBudgetUsd": "12.5"}
    assert said == [
        "  answer webhook or app",
        "  give a Secrets Manager secret ARN (arn:aws:secretsmanager:<region>:<account>:secret:...)",
        "  give an amount of 0 or more",
    ]


def test_enter_takes_each_default(config: Path) -> None:
    written = run_init(config, read=lambda _: "", out=print, region="us-east-1")
    assert written == {"SlackApp": "off", "SlackWebhookSecretArn": "", "MonthlyGpuBudgetUsd": "0"}


def test_input_that_ends_names_the_option_that_answers(config: Path) -> None:
    def ended(_: str) -> str:
        raise EOFError

    with pytest.raises(InitError, match="give --slack to answer it"):
        run_init(config, read=ended, region="us-east-1")
    assert config.read_text() == SAMCONFIG.read_text(), "nothing written"


@pytest.mark.parametrize(("stop", "said"), [(EOFError, "input ended"), (KeyboardInterrupt, "interrupted")])
def test_the_error_starts_on_a_line_of_its_own_and_writes_nothing(
    config: Path, stop: type[BaseException], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 41: the prompt's line is ended before the error, so the error never lands after the question."""

    def stopped(prompt: str) -> str:
        print(prompt, end="")  # as input() shows it: no newline
        raise stop

    with pytest.raises(InitError, match=f"\\({said}\\): nothing was written"):
        run_init(config, read=stopped, region="us-east-1")
    assert capsys.readouterr().out.endswith(": \n")  # the prompt, then the line ended
    assert config.read_text() == SAMCONFIG.read_text()


def test_options_answer_without_asking(
    config: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("builtins.input", _never)
    arn = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:costguard/slack-AbCdEf"
    argv = ["init", "--config-file", str(config), "--slack", "app", "--secret-arn", arn, "--budget", "700"]
    assert main(argv) == 0
    assert f"SlackWebhookSecretArn={arn}" in capsys.readouterr().out
    assert {
        k: overrides(tomllib.loads(config.read_text()), "default")[k]
        for k in ("SlackApp", "MonthlyGpuBudgetUsd")
    } == {
        "SlackApp": "on",
        "MonthlyGpuBudgetUsd": "700",
    }
    # Answered in the file: a second run asks nothing.
    assert main(["init", "--config-file", str(config)]) == 0
    assert "already answers every question" in capsys.readouterr().out


def test_a_missing_file_or_a_bad_option_exits_2_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["init", "--config-file", str(tmp_path / "none.toml")]) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith("costguard init: ") and "\n" not in error
    with pytest.raises(SystemExit) as refused:
        main(["init", "--config-file", str(tmp_path / "none.toml"), "--budget", "lots"])
    assert refused.value.code == 2
    assert "give an amount in USD" in capsys.readouterr().err
