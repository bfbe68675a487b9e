"""The tracer loads the X-Ray SDK only when a call is traced."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from costguard import observability
from tests.conftest import ROOT


def test_importing_the_shared_observability_does_not_load_the_xray_sdk() -> None:
    probe = "import sys; import costguard.observability; print('aws_xray_sdk' in sys.modules)"
    done = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT / "shared"), "AWS_LAMBDA_FUNCTION_NAME": "f", "PATH": ""},
    )
    assert done.stdout.strip() == "False"


def test_with_tracing_off_the_handler_runs_untraced(monkeypatch: pytest.MonkeyPatch) -> None:
    tracer = observability.LazyTracer()
    monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "true")

    @tracer.capture_lambda_handler
    def handler(event: Any, context: Any) -> Any:
        return {"event": event}

    assert handler(1, None) == {"event": 1}
    assert tracer._tracer is None  # never built


def test_with_tracing_on_the_real_tracer_wraps_the_handler_once(monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[str] = []

    class FakeTracer:
        def capture_lambda_handler(self, fn: Any) -> Any:
            built.append("handler")
            return lambda event, context: {"traced": fn(event, context)}

        def capture_method(self, fn: Any) -> Any:
            built.append("method")
            return lambda *a, **k: ("traced", fn(*a, **k))

    tracer = observability.LazyTracer()
    monkeypatch.setattr(tracer, "_real", lambda: FakeTracer())
    monkeypatch.delenv("POWERTOOLS_TRACE_DISABLED", raising=False)
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", "costguard-f")

    @tracer.capture_lambda_handler
    def handler(event: Any, context: Any) -> Any:
        return event

    @tracer.capture_method
    def step(x: int) -> int:
        return x + 1

    assert handler(1, None) == {"traced": 1} and handler(2, None) == {"traced": 2}
    assert step(1) == ("traced", 2)
    assert built == ["handler", "method"]  # wrapped at first use, once
