"""Bad option values are refused by the command line itself (argparse, exit 2), naming the option."""

from __future__ import annotations

import pytest

from costguard.cli import parser
from tests.conftest import EVENTS

FAILED = str(EVENTS / "sagemaker-training-job-failed.json")


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["replay", FAILED, "--now", "yesterday"], "argument --now: 'yesterday' is not a time"),
        (["replay", FAILED, "--now", "2026-13-45T00:00:00Z"], "argument --now"),
        (["replay", FAILED, "--now", "nan"], "argument --now"),
        (
            ["replay", FAILED, "--function", "NoSuchFunction"],
            "argument --function: no function 'NoSuchFunction'",
        ),
        (["audit", "--now", "soon"], "argument --now"),
        (["backtest", "--now", "soon"], "argument --now"),
        (["backtest", "--days", "-3"], "argument --days: must be more than 0"),
        (["backtest", "--days", "0"], "argument --days"),
        (["backtest", "--days", "100000"], "argument --days"),
        (["backtest", "--days", "inf"], "argument --days"),
        (["backtest", "--step", "0"], "argument --step"),
        (
            ["backtest", "--idle-threshold", "150"],
            "argument --idle-threshold: must be at least 0 and at most 100",
        ),
        (["backtest", "--idle-threshold", "-1"], "argument --idle-threshold"),
        (["backtest", "--idle-window", "2"], "argument --idle-window"),
        (["backtest", "--idle-window", "ten"], "argument --idle-window: 'ten' is not a whole number"),
        (["backtest", "--grace", "-5"], "argument --grace"),
        (["backtest", "--near-miss-horizon", "-1"], "argument --near-miss-horizon"),
        (
            ["backtest", "--sweep", "idle-threshold=2,5,150"],
            "argument --sweep: 'idle-threshold=2,5,150': 150",
        ),
        (["backtest", "--sweep", "idle-window=0"], "argument --sweep"),
        (["backtest", "--sweep", "colour=red"], "argument --sweep"),
    ],
)
def test_a_bad_value_exits_2_naming_the_option(
    argv: list[str], named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        parser().parse_args(argv)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert named in err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    "argv",
    [
        ["replay", FAILED, "--now", "2026-11-20T13:00:00Z", "--function", "budgets"],
        ["replay", FAILED, "--now", "1795179600", "--function", "TrainingJobsFunction"],
        ["backtest", "--days", "7", "--idle-threshold", "100", "--idle-window", "30", "--grace", "0"],
        ["backtest", "--sweep", "idle-threshold=0,5,100", "idle-window=15,30", "grace=0,15"],
    ],
)
def test_good_values_pass(argv: list[str]) -> None:
    args = parser().parse_args(argv)
    if args.command == "replay":
        assert args.now.tzinfo is not None
        assert args.function in ("BudgetsFunction", "TrainingJobsFunction")


def test_the_command_gives_powertools_the_templates_variables_the_caller_did_not_set(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """costguard.observability reads them at import, which building the parser may already trigger."""
    from costguard.cli import _powertools_defaults

    monkeypatch.delenv("POWERTOOLS_METRICS_NAMESPACE", raising=False)
    monkeypatch.setenv("POWERTOOLS_SERVICE_NAME", "mine")
    defaults = _powertools_defaults()
    assert defaults["POWERTOOLS_METRICS_NAMESPACE"] == "Costguard"
    assert "POWERTOOLS_SERVICE_NAME" not in defaults  # the caller's own value wins
