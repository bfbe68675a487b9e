"""The garbage collector is paused for a Lambda cold start's imports and resumed by the first invocation."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import ROOT

_PROBE = """
import gc, types
from costguard.handler import lambda_entry
import costguard.model
print("after import", gc.isenabled(), gc.get_freeze_count() > 0)

@lambda_entry
def handler(event, context):
    return {"collecting": gc.isenabled(), "frozen": gc.get_freeze_count() > 0}

context = types.SimpleNamespace(
    function_name="f", memory_limit_in_mb=256, invoked_function_arn="arn:aws:lambda:us-east-1:1:function:f",
    aws_request_id="r-1",
)
print("first call", handler({"id": "e-1"}, context))
print("second call", handler({"id": "e-2"}, context))
"""


def _run(env: dict[str, str]) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT / "shared"), "PATH": "", "POWERTOOLS_TRACE_DISABLED": "true"} | env,
    )
    return done.stdout.strip().splitlines()


def test_in_lambda_the_imports_run_without_collections_and_the_first_invocation_resumes_them() -> None:
    lines = _run({"AWS_LAMBDA_FUNCTION_NAME": "costguard-f"})
    assert lines[0] == "after import False False"
    # Resumed before the body runs; what the import built is frozen out of the collector's way.
    assert lines[1] == "first call {'collecting': True, 'frozen': True}"
    assert lines[2] == "second call {'collecting': True, 'frozen': True}"


def test_outside_lambda_nothing_is_paused() -> None:
    lines = _run({})
    assert lines[0] == "after import True False"
    assert lines[1] == "first call {'collecting': True, 'frozen': False}"
