"""checkov on template.yaml and member.yaml: no failed check. A check costguard does not meet is skipped in the resource's
Metadata (``checkov: skip:``) with the reason next to it, so every exception is read where it applies.

checkov lives in its own virtual environment (`make setup` creates .venv-checkov); like the SAM CLI tests,
this one fails rather than skips when it is missing.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from costguard.local.template import Template

pytestmark = pytest.mark.template

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "template.yaml"
MEMBER_TEMPLATE = ROOT / "member.yaml"
# Read at import: the autouse fixture in tests/conftest.py removes COSTGUARD_* variables before a test runs.
CHECKOV_FROM_ENV = os.environ.get("COSTGUARD_CHECKOV")
TIMEOUT_SECONDS = 600


def _checkov() -> Path:
    binary = Path(CHECKOV_FROM_ENV) if CHECKOV_FROM_ENV else ROOT / ".venv-checkov" / "bin" / "checkov"
    if not binary.is_absolute():
        binary = ROOT / binary
    if not (binary.is_file() and os.access(binary, os.X_OK)):
        pytest.fail(f"checkov not found at {binary}: run `make setup` to create .venv-checkov", pytrace=False)
    return binary


def _scan(tmp_path: Path, template: Path = TEMPLATE) -> dict[str, Any]:
    command = [
        str(_checkov()),
        "--file",
        str(template),
        "--framework",
        "cloudformation",
        "--output",
        "json",
        "--quiet",
        "--compact",
        "--skip-download",  # the built-in checks only: no network, the same result on every run
    ]
    env = dict(os.environ, BC_SKIP_MAPPING="TRUE", CHECKOV_RUN_SCA_PACKAGE_SCAN_V2="false")
    result = subprocess.run(
        command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=TIMEOUT_SECONDS, check=False
    )
    try:
        report = json.loads(result.stdout)
    except json.JSONDecodeError:
        pytest.fail(f"checkov exited {result.returncode} without a report:\n{result.stdout}\n{result.stderr}")
    if isinstance(report, list):  # one report per framework
        (report,) = report
    assert isinstance(report, dict), report
    return report


def _skip_reasons(template: Path = TEMPLATE) -> dict[str, list[tuple[str, str]]]:
    """Resource -> (check id, comment) of every checkov skip in the template's Metadata."""
    found: dict[str, list[tuple[str, str]]] = {}
    for name, resource in Template.load(template).resources.items():
        skips = (resource.get("Metadata") or {}).get("checkov", {}).get("skip", [])
        found[name] = [(str(s.get("id")), str(s.get("comment") or "")) for s in skips]
    return found


def test_checkov_finds_no_failed_check(tmp_path: Path) -> None:
    report = _scan(tmp_path)
    summary = report["summary"]
    assert summary["parsing_errors"] == 0, summary
    assert summary["resource_count"] >= len(Template.load(TEMPLATE).resources) // 2, summary
    failed = [
        f"{c['check_id']} {c['resource']}: {c['check_name']}" for c in report["results"]["failed_checks"]
    ]
    assert not failed, "checkov failed checks (fix them, or skip in Metadata with the reason):\n" + "\n".join(
        failed
    )
    assert summary["passed"] > 0, summary


def test_every_checkov_skip_says_why() -> None:
    skips = _skip_reasons()
    assert any(skips.values()), "no checkov skip found: the scan test would then check everything"
    unexplained = [
        f"{resource}: {check}" for resource, items in skips.items() for check, why in items if len(why) < 20
    ]
    assert not unexplained, "checkov skips without a reason:\n" + "\n".join(unexplained)
    # Least privilege is never skipped: the IAM checks must pass as they are.
    iam_checks = {"CKV_AWS_107", "CKV_AWS_108", "CKV_AWS_109", "CKV_AWS_110", "CKV_AWS_111", "CKV_AWS_63"}
    skipped_iam = [f"{r}: {c}" for r, items in skips.items() for c, _ in items if c in iam_checks]
    assert not skipped_iam, skipped_iam


@pytest.mark.xdist_group("checkov_member")
def test_checkov_finds_no_failed_check_in_member_yaml(tmp_path: Path) -> None:
    """The member stack every account of the organization runs: nothing skipped at all."""
    report = _scan(tmp_path, MEMBER_TEMPLATE)
    summary = report["summary"]
    assert summary["parsing_errors"] == 0, summary
    failed = [
        f"{c['check_id']} {c['resource']}: {c['check_name']}" for c in report["results"]["failed_checks"]
    ]
    assert not failed, "checkov failed checks in member.yaml:\n" + "\n".join(failed)
    assert summary["passed"] > 0 and summary["skipped"] == 0, summary
    assert not any(_skip_reasons(MEMBER_TEMPLATE).values())
