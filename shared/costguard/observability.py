"""Logger, tracer and metrics: created once, imported everywhere.

The tracer is powertools' Tracer built at its first use, and only when tracing is on: the X-Ray SDK it loads costs
about 150 ms of import, which a cold start with tracing off (or a handler that rejects its event) never pays.

A handled problem is a warning, and its log line names the error by type and message (``problem``), not with a
traceback: ``logger.warning(..., exc_info=True)`` logs ``"exception": "ClientError: An error occurred ..."``. An
error (``logger.exception``, ``logger.error(..., exc_info=True)``) keeps its full traceback.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Callable
from typing import Any, TypeVar

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.logging.formatter import LambdaPowertoolsFormatter

PROBLEM_LIMIT = 2000  # characters of an error's message in a warning's log line


def problem(error: BaseException) -> str:
    """An error in one line: its type and message (``ClientError: An error occurred (Throttling) ...``)."""
    message = " ".join(str(error).split())[:PROBLEM_LIMIT]
    return f"{type(error).__name__}: {message}" if message else type(error).__name__


class HandledFormatter(LambdaPowertoolsFormatter):
    """powertools' JSON lines, with a warning's (or lower) exception told as ``problem``: a handled error is
    named, not traced. ERROR and above keep powertools' traceback."""

    def format(self, record: logging.LogRecord) -> str:
        error = record.exc_info[1] if isinstance(record.exc_info, tuple) else None
        if error is not None and record.levelno < logging.ERROR:
            told = logging.makeLogRecord(record.__dict__)
            told.exc_info, told.exc_text = None, None
            told.__dict__.setdefault("exception", problem(error))
            told.__dict__.setdefault("exception_name", type(error).__name__)
            record = told
        return super().format(record)


logger = Logger(logger_formatter=HandledFormatter())
metrics = Metrics()

# The correlation id of every log line: the id of the event a handler was given, for each shape costguard
# receives (``logger.inject_lambda_context(correlation_id_path=EVENT_ID_PATH)``). JMESPath's ``||`` takes the
# first that is there: an EventBridge event's "id"; an SNS delivery's message id; an SQS batch's first message
# id (the notifier, the interactions consumer, an organization sweep's work items); a Function URL request's id.
# An event of none of these shapes (a Step Functions task's input) logs no correlation id.
EVENT_ID_PATH = "id || Records[0].Sns.MessageId || Records[0].messageId || requestContext.requestId"

F = TypeVar("F", bound=Callable[..., Any])


def tracing_on() -> bool:
    """As powertools decides it: in Lambda, unless POWERTOOLS_TRACE_DISABLED says otherwise."""
    disabled = os.environ.get("POWERTOOLS_TRACE_DISABLED", "").strip().lower() in ("1", "true", "yes", "on")
    return not disabled and bool(os.environ.get("AWS_LAMBDA_FUNCTION_NAME"))


class LazyTracer:
    """The decorators of powertools' Tracer, building the Tracer (and loading the X-Ray SDK) on the first call
    that traces."""

    def __init__(self) -> None:
        self._tracer: Any = None

    def _real(self) -> Any:
        if self._tracer is None:
            from aws_lambda_powertools import Tracer

            self._tracer = Tracer()
        return self._tracer

    def capture_lambda_handler(self, handler: F) -> F:
        traced: list[Callable[..., Any]] = []

        @functools.wraps(handler)
        def run(event: Any, context: Any, *args: Any, **kwargs: Any) -> Any:
            if not tracing_on():
                return handler(event, context, *args, **kwargs)
            if not traced:
                traced.append(self._real().capture_lambda_handler(handler))
            return traced[0](event, context, *args, **kwargs)

        return run  # type: ignore[return-value]

    def capture_method(self, method: F) -> F:
        traced: list[Callable[..., Any]] = []

        @functools.wraps(method)
        def run(*args: Any, **kwargs: Any) -> Any:
            if not tracing_on():
                return method(*args, **kwargs)
            if not traced:
                traced.append(self._real().capture_method(method))
            return traced[0](*args, **kwargs)

        return run  # type: ignore[return-value]


tracer = LazyTracer()
