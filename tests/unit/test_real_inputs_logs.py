"""A handled warning's log line names its error by type and message; an error keeps its traceback (issue 39,
case 7). The log lines are the functions' own (costguard.observability.logger's formatter)."""

from __future__ import annotations

import json
import logging
import sys
from typing import Any

import pytest

from costguard.observability import HandledFormatter, logger, problem


def _line(level: int, error: BaseException) -> dict[str, Any]:
    try:
        raise error
    except type(error):
        record = logging.LogRecord("costguard", level, __file__, 1, "handled", None, sys.exc_info())
    record.__dict__["cluster"] = "llm-pretrain-hp"  # an extra, as logger.warning(..., extra=...) sets
    line: dict[str, Any] = json.loads(logger.registered_formatter.format(record))
    return line


def test_the_functions_logger_uses_the_formatter() -> None:
    assert isinstance(logger.registered_formatter, HandledFormatter)


@pytest.mark.parametrize("level", [logging.WARNING, logging.INFO])
def test_a_handled_warning_logs_the_errors_type_and_message_without_a_traceback(level: int) -> None:
    line = _line(level, LookupError("node i-0b7e5f00000000dead\nnot found"))
    assert line["exception"] == "LookupError: node i-0b7e5f00000000dead not found"
    assert line["exception_name"] == "LookupError"
    assert "Traceback" not in json.dumps(line)
    assert line["message"] == "handled" and line["cluster"] == "llm-pretrain-hp"


def test_an_error_keeps_its_traceback() -> None:
    line = _line(logging.ERROR, RuntimeError("broken"))
    assert line["exception"].startswith("Traceback (most recent call last)")
    assert "RuntimeError: broken" in line["exception"] and line["exception_name"] == "RuntimeError"


def test_problem_is_one_line() -> None:
    assert problem(ValueError("a\n  b")) == "ValueError: a b"
    assert problem(KeyError()) == "KeyError"
    assert len(problem(ValueError("x" * 10_000))) < 2100
