"""Against AWS without what it takes (credentials, a region, a writable folder, a real region name), each command
says so in one sentence and exits 2: no traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from botocore.exceptions import ClientError, NoCredentialsError, NoRegionError

from costguard.aws import clients
from costguard.cli import main
from costguard.local.aws_errors import ends_the_run, explain
from tests.conftest import ROOT


@pytest.fixture
def no_aws(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No credentials and no region anywhere botocore looks (environment, shared files, instance metadata)."""
    for key in list(os.environ):
        if key.startswith("AWS_"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    clients.reset()


def one_sentence(err: str) -> str:
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["redrive"], "costguard redrive: no AWS region is set: give --region, or set AWS_REGION"),
        (["doctor"], "costguard doctor: no AWS region is set: give --region, or set AWS_REGION"),
        (["audit", "--live"], "costguard audit --live: no AWS region is set: give --region"),
    ],
)
def test_without_a_region(
    argv: list[str], said: str, no_aws: None, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    if argv[0] == "audit":
        argv = [*argv, "--out", str(tmp_path / "out")]
    assert main(argv) == 2
    assert one_sentence(capsys.readouterr().err).startswith(said)


@pytest.mark.parametrize(
    "argv",
    [
        ["backtest", "--live"],
        ["backtest", "--live", "--region", "eu-west-1"],
        ["audit", "--live", "--regions", "us-east-1"],
    ],
)
def test_without_credentials(
    argv: list[str], no_aws: None, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    if argv[0] == "audit":
        argv = [*argv, "--out", str(tmp_path / "out")]
    assert main(argv) == 2
    sentence = one_sentence(capsys.readouterr().err)
    assert sentence.startswith(f"costguard {argv[0]}: no AWS credentials were found: set AWS_PROFILE")


def test_doctor_without_credentials(no_aws: None, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor", "--region", "us-east-1"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1].startswith("costguard doctor: no AWS credentials were found")


def test_audit_to_an_unwritable_folder_stops_before_running(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    assert main(["audit", "--out", str(blocker / "reports")]) == 2
    sentence = one_sentence(capsys.readouterr().err)
    assert (
        sentence
        == f"costguard audit: cannot write the reports to {blocker / 'reports'}: Not a directory (NotADirectoryError)"
    )


@pytest.mark.parametrize(
    "argv",
    [
        ["audit", "--regions", "us-east-9"],
        ["audit", "--regions", "us-east-1,us-east-9"],
        ["audit", "--live", "--regions", "us-east-9"],
        ["doctor", "--region", "us-east-9"],
        ["backtest", "--live", "--region", "us-east-9"],
    ],
)
def test_a_region_aws_has_not_is_refused_by_the_command_line(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert "'us-east-9' is not an AWS region" in err.strip().splitlines()[-1]


def test_a_scrubbed_environment_gets_a_sentence_not_a_traceback(tmp_path: Path) -> None:
    """As a user runs it: a fresh interpreter with no AWS configuration at all."""
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(tmp_path),
        "PYTHONPATH": os.environ.get("PYTHONPATH", ""),
        "AWS_EC2_METADATA_DISABLED": "true",
    }
    run = subprocess.run(
        [sys.executable, "-m", "costguard.cli", "redrive", "--stack", "costguard"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 2, run.stderr
    assert one_sentence(run.stderr).startswith("costguard redrive: no AWS region is set")


def _client_error(code: str, operation: str = "DescribeStacks", message: str = "") -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": message}}, operation)


def test_the_sentences() -> None:
    assert explain(KeyError("x")) is None
    assert explain(NoRegionError()) == (
        "no AWS region is set: set AWS_REGION (or AWS_DEFAULT_REGION), or a region in your AWS profile"
    )
    assert (explain(NoCredentialsError()) or "").startswith("no AWS credentials were found")
    assert explain(_client_error("AccessDenied", "DescribeBudgets")) == (
        "AWS denied DescribeBudgets (AccessDenied): the credentials' IAM policy does not allow it"
    )
    assert (explain(_client_error("ExpiredToken")) or "").startswith(
        "AWS refused the credentials (ExpiredToken): they have expired or are wrong"
    )
    assert explain(_client_error("ValidationError", message="Stack with id costguard does not exist")) == (
        "AWS answered DescribeStacks with ValidationError: Stack with id costguard does not exist"
    )
    assert ends_the_run(NoCredentialsError()) and ends_the_run(_client_error("ExpiredToken"))
    assert not ends_the_run(_client_error("AccessDenied")) and not ends_the_run(KeyError("x"))
