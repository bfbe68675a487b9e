"""Chosen operations of a real boto3 client answered in-process.

The request is still validated against the service model and counted in ``clients.calls``; only the HTTP
exchange is replaced: each operation's parameters go to its handler, whose dictionary is the parsed response.
local/metric_responder.py (CloudWatch) and local/holdings.py (Cost Explorer, Compute Optimizer) answer through it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from botocore.awsrequest import AWSResponse
from botocore.compat import HTTPHeaders

Handler = Callable[[dict[str, Any]], dict[str, Any]]


class Responder:
    """Answers each operation of ``handlers`` (operation name -> handler of its parameters) on the clients it is
    installed on; ``url`` is the answers' stand-in address."""

    def __init__(self, handlers: Mapping[str, Handler], url: str) -> None:
        self.handlers = dict(handlers)
        self.url = url
        self._params: dict[str, dict[str, Any]] = {}

    def install(self, client: Any) -> None:
        """Answer those of its operations ``client``'s service has (one at least) on ``client``."""
        model = client.meta.service_model
        operations = [operation for operation in self.handlers if operation in model.operation_names]
        if not operations:
            raise ValueError(f"{model.service_name} has none of {sorted(self.handlers)}")
        name = model.service_id.hyphenize()
        for operation in operations:
            client.meta.events.register(f"before-parameter-build.{name}.{operation}", self._keep)
            client.meta.events.register_last(f"before-call.{name}.{operation}", self._answer)

    def _keep(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        # The request's parameters as the caller gave them, before serialisation.
        self._params[model.name] = dict(params)

    def _answer(self, model: Any, **_: Any) -> tuple[AWSResponse, dict[str, Any]]:
        # Returning a response from before-call skips the HTTP exchange.
        body = self.handlers[model.name](self._params.pop(model.name))
        return AWSResponse(self.url, 200, HTTPHeaders(), None), body
