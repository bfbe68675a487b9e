"""The Lambda handler every function's app.py builds: the shell is written once, here.

``lambda_entry`` is the shell itself: each log line carries the event's id as its correlation id (the state of
the last invocation cleared), the invocation is traced when tracing is on, and the metrics are flushed.
``event_handler`` adds what every event-driven function does inside it: parse the event into one of the models
it accepts (a malformed or unexpected one is rejected: kept, logged, counted, answered), then hand the model to
its route. A route wrapped in ``OncePerEvent`` is also given the invocation's context (its idempotency record
expires with it). A function with an organization sweep (``OrgSweep``) also takes the sweep's work batches, and
fans its scheduled event out when it runs for an organization.

The organization sweep's module (flows/org.py, with powertools' batch utility) and the runtime are imported by
the first work batch or fan-out: this module loads neither.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel

from costguard import resume_collector
from costguard.entry import OncePerEvent, Rejected, parse_event
from costguard.events.scheduled import ScheduledEvent
from costguard.observability import EVENT_ID_PATH, logger, metrics, tracer

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext

    from costguard.flows.org import SweepItem
    from costguard.pipeline import Report
    from costguard.settings import Settings

H = TypeVar("H", bound=Callable[..., Any])

# What an accepted model is handed to: a flow's answer for it. An OncePerEvent route also gets the context.
Route = Callable[[Any], dict[str, Any]]
Handler = Callable[[dict[str, Any], "LambdaContext"], dict[str, Any]]


def lambda_entry(body: H) -> H:
    """The shell around a function's body: correlated logs, the trace, the metrics flush; and, at the first
    invocation, the garbage collector resumed (paused for the cold start's imports: costguard/__init__.py).

    The body keeps the name ``lambda_handler``: the trace names its segment after the handler."""
    body.__name__ = body.__qualname__ = "lambda_handler"
    traced = tracer.capture_lambda_handler(metrics.log_metrics(body))
    shell = logger.inject_lambda_context(correlation_id_path=EVENT_ID_PATH, clear_state=True)(traced)

    @functools.wraps(shell)
    def lambda_handler(event: Any, context: Any) -> Any:
        resume_collector()
        return shell(event, context)

    return lambda_handler  # type: ignore[return-value]


@dataclass(frozen=True)
class OrgSweep:
    """An organization's sweep (flows/org.py): its scheduled event fans out as work items of accounts and
    regions when ``settings.organization`` is set, and each target of a work item comes back, in an SQS batch,
    to ``one``. With ``probe`` (aws/presence.py), the account-regions it finds nothing in are swept only at the
    hourly census."""

    name: str  # the sweep's name on its work items ("gpu", "sagemaker", ...)
    one: Callable[[SweepItem, datetime], Report]  # one item: one account and region
    settings: Settings
    interval: timedelta  # its schedule's rate (flows/org.py SWEEP_INTERVALS)
    probe: Callable[[str], bool] | None = None  # a region of the acting account holds something to sweep


def event_handler(
    function: str,
    routes: Mapping[type[BaseModel], Route],
    *,
    converts: Mapping[type[BaseModel], Callable[[Any], BaseModel]] | None = None,
    sweep: OrgSweep | None = None,
) -> Handler:
    """The handler of a function that parses its event: ``routes`` names each accepted model's flow.

    ``converts`` takes a model that is another delivery of a routed one (an SNS alarm action for the
    EventBridge state change) and turns it into that one. With ``sweep``, the scheduled event (which must be
    routed: the sweep of this account, outside an organization) fans out in an organization, and a work batch
    runs its items.
    """
    converts = dict(converts or {})
    if set(converts) & set(routes):
        raise ValueError(f"{function}: a converted model is not routed itself")
    if sweep is not None and ScheduledEvent not in routes:
        raise ValueError(f"{function}: an organization sweep needs a route for its ScheduledEvent")
    accepted = (*routes, *converts)

    def body(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
        if sweep is not None and _is_work_batch(event):
            return _run_items(event, context, sweep, function)
        try:
            model = parse_event(event, accepted, function=function)
            convert = converts.get(type(model))
            if convert is not None:
                model = convert(model)
        except Rejected as rejected:
            return rejected.result
        if sweep is not None and isinstance(model, ScheduledEvent) and sweep.settings.organization:
            from costguard.flows.org import fan_out

            return fan_out(
                sweep.name,
                model,
                sweep.settings,
                census=sweep.probe is not None,
                interval=sweep.interval,
            )
        route = _route(routes, model, function)
        return route(model, context) if isinstance(route, OncePerEvent) else route(model)

    return lambda_entry(body)


def _route(routes: Mapping[type[BaseModel], Route], model: BaseModel, function: str) -> Route:
    if type(model) in routes:
        return routes[type(model)]
    for kind, route in routes.items():
        if isinstance(model, kind):
            return route
    raise TypeError(f"{function}: no route for {type(model).__name__}")  # a conversion into an unrouted model


def _is_work_batch(event: Any) -> bool:
    from costguard.flows.org import is_work_batch

    return is_work_batch(event)


def _run_items(
    event: dict[str, Any], context: LambdaContext, sweep: OrgSweep, function: str
) -> dict[str, Any]:
    from costguard import clock
    from costguard.flows.org import run_items
    from costguard.runtime import runtime

    return run_items(
        event,
        context,
        runtime=runtime(),
        now=clock.now,
        sweep=sweep.one,
        function=function,
        probe=sweep.probe,
    )
