"""A local HTTP server that plays the Kubernetes API of a world's EKS clusters: the few endpoints costguard calls,
so that the real Kubernetes client's code path runs (URL building, paging, bearer token, patch).

Each cluster is served under ``/clusters/<name>``, which the embedded EKS gives as the cluster's endpoint. The
bearer token must be an EKS token (a presigned STS GetCallerIdentity URL signing ``x-k8s-aws-id``); a cluster
without an access entry answers 401. Only reads and the ``scale`` subresource are answered: any other write (a
delete above all) is refused with 405 and counted, so that tests can say none was made.

What the real API also answers, on request (``fail``): ``410 Expired`` for a stale ``continue`` token, ``429`` with
``Retry-After``, ``500``, ``503``, or any other status, on any page of any list, a given number of times.
"""

from __future__ import annotations

import base64
import json
import re
import threading
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from costguard.local.eks_world import EksCluster, api_objects

_LISTS = {
    "api/v1/nodes": "nodes",
    "api/v1/pods": "pods",
    "api/v1/namespaces": "namespaces",
    "apis/apps/v1/replicasets": "replicasets",
    "apis/apps/v1/statefulsets": "statefulsets",
}
_SCALE = re.compile(r"apis/apps/v1/namespaces/([^/]+)/(deployments|statefulsets)/([^/]+)/scale")
_KINDS = {"deployments": "Deployment", "statefulsets": "StatefulSet"}
_REASONS = {
    410: ("Expired", "The provided continue parameter is too old to display a consistent list result."),
    429: ("TooManyRequests", "Too many requests, please try again later."),
    500: ("InternalError", "Internal error occurred: etcdserver: request timed out"),
    503: ("ServiceUnavailable", "The server is currently unable to handle the request"),
}


@dataclass
class Fault:
    """A planned failure of a list: ``status`` answered to ``times`` requests (None: every one) of ``resource``
    (a list name such as ``pods``, or ``*``) on page ``page`` (0 is the first; None: any page)."""

    cluster: str
    resource: str
    status: int
    times: int | None = 1
    retry_after: int | None = None
    page: int | None = None
    answered: int = 0

    def matches(self, cluster: str, resource: str, page: int) -> bool:
        return (
            self.cluster == cluster
            and self.resource in (resource, "*")
            and self.page in (None, page)
            and (self.times is None or self.answered < self.times)
        )


def valid_token(header: str | None) -> bool:
    """Whether an Authorization header carries an EKS token: what `aws eks get-token` makes."""
    if not header or not header.startswith("Bearer k8s-aws-v1."):
        return False
    encoded = header.removeprefix("Bearer k8s-aws-v1.")
    try:
        url = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).decode()
    except (ValueError, UnicodeDecodeError):
        return False
    query = parse_qs(urlsplit(url).query)
    return (
        query.get("Action") == ["GetCallerIdentity"]
        and "x-k8s-aws-id" in query.get("X-Amz-SignedHeaders", [""])[0].split(";")
        and bool(query.get("X-Amz-Signature"))
    )


class KubeResponder:
    """Serves the clusters' objects; ``calls`` counts each request by (cluster, method, what)."""

    def __init__(self, clusters: Iterable[EksCluster], now: datetime) -> None:
        self.clusters = {c.name: c for c in clusters}
        self.objects = {c.name: api_objects(c, now) for c in self.clusters.values()}
        self.calls: Counter[tuple[str, str, str]] = Counter()
        self.refused: list[tuple[str, str, str]] = []
        self.faults: list[Fault] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def origin(self) -> str:
        assert self._server is not None, "responder not started"
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def endpoint(self, cluster: str) -> str:
        return f"{self.origin}/clusters/{cluster}"

    def fail(
        self,
        cluster: str,
        resource: str,
        status: int,
        *,
        times: int | None = 1,
        retry_after: int | None = None,
        page: int | None = None,
    ) -> Fault:
        """Plan a failure: the cluster's list of ``resource`` (``nodes``, ``pods``, ``namespaces``,
        ``replicasets``, ``statefulsets`` or ``*``) answers ``status`` (with ``Retry-After: retry_after`` when
        given) ``times`` times (None: always), on page ``page`` (0 is the first, None any). A 410 is the real API's
        answer to a stale ``continue`` token: plan it on a page past the first."""
        fault = Fault(cluster, resource, status, times, retry_after, page)
        with self._lock:
            self.faults.append(fault)
        return fault

    def writes(self) -> list[tuple[str, str, str]]:
        """Every call that was not a read (answered or refused)."""
        return sorted(k for k in self.calls.elements() if k[1] != "GET")

    def replicas(self, cluster: str, kind: str, namespace: str, name: str) -> int | None:
        resource = "deployments" if kind == "Deployment" else "statefulsets"
        for item in self.objects[cluster][resource]:
            meta = item["metadata"]
            if meta["name"] == name and meta.get("namespace") == namespace:
                return int(item["spec"]["replicas"])
        return None

    # -- answering --------------------------------------------------------------------------------------
    def answer(
        self, method: str, path: str, query: dict[str, list[str]], body: bytes, auth: str | None
    ) -> tuple[int, Any]:
        status, reply, _ = self.respond(method, path, query, body, auth)
        return status, reply

    def respond(
        self, method: str, path: str, query: dict[str, list[str]], body: bytes, auth: str | None
    ) -> tuple[int, Any, dict[str, str]]:
        """The status, body and extra headers of the answer to one request."""
        parts = path.strip("/").split("/", 2)
        listing = method == "GET" and len(parts) == 3 and parts[2] in _LISTS and parts[1] in self.clusters
        if listing and self.clusters[parts[1]].reachable != "no_access" and valid_token(auth):
            fault = self._fault(parts[1], _LISTS[parts[2]], query)
            if fault is not None:
                return fault
        status, reply = self._answer(method, path, query, body, auth)
        return status, reply, {}

    def _fault(
        self, cluster: str, resource: str, query: dict[str, list[str]]
    ) -> tuple[int, Any, dict[str, str]] | None:
        limit = int(query.get("limit", ["0"])[0] or 0)
        offset = int(query.get("continue", ["0"])[0] or 0)
        page = offset // limit if limit else 0
        with self._lock:
            fault = next((f for f in self.faults if f.matches(cluster, resource, page)), None)
            if fault is None:
                return None
            fault.answered += 1
            self.calls[(cluster, "GET", _path_of(resource))] += 1
        reason, message = _REASONS.get(fault.status, ("InternalError", f"planned failure {fault.status}"))
        headers = {"Retry-After": str(fault.retry_after)} if fault.retry_after is not None else {}
        return fault.status, _status(fault.status, reason, message), headers

    def _answer(
        self, method: str, path: str, query: dict[str, list[str]], body: bytes, auth: str | None
    ) -> tuple[int, Any]:
        parts = path.strip("/").split("/", 2)
        if len(parts) < 3 or parts[0] != "clusters" or parts[1] not in self.clusters:
            return 404, _status(404, "NotFound", "no such cluster")
        cluster, rest = parts[1], parts[2]
        what = _SCALE.sub(r"\2/scale", rest) if _SCALE.fullmatch(rest) else rest
        with self._lock:
            self.calls[(cluster, method, what)] += 1
        if self.clusters[cluster].reachable == "no_access" or not valid_token(auth):
            return 401, _status(401, "Unauthorized", "Unauthorized")
        if method == "GET" and rest in _LISTS:
            return 200, self._list(cluster, _LISTS[rest], query)
        scale = _SCALE.fullmatch(rest)
        if scale is not None and method in ("GET", "PATCH"):
            namespace, resource, name = scale.groups()
            return self._scale(cluster, method, namespace, resource, name, body)
        with self._lock:
            self.refused.append((cluster, method, rest))
        return 405, _status(405, "MethodNotAllowed", f"{method} {rest} is not something costguard may do")

    def _list(self, cluster: str, resource: str, query: dict[str, list[str]]) -> dict[str, Any]:
        with self._lock:
            items = list(self.objects[cluster][resource])
        limit = int(query.get("limit", ["0"])[0] or 0) or len(items) or 1
        offset = int(query.get("continue", ["0"])[0] or 0)
        page = items[offset : offset + limit]
        meta: dict[str, Any] = {"resourceVersion": "1"}
        if offset + limit < len(items):
            meta["continue"] = str(offset + limit)
        return {"kind": "List", "apiVersion": "v1", "metadata": meta, "items": page}

    def _scale(
        self, cluster: str, method: str, namespace: str, resource: str, name: str, body: bytes
    ) -> tuple[int, Any]:
        objects = self.objects[cluster]
        with self._lock:
            found = next(
                (
                    i
                    for i in objects[resource]
                    if i["metadata"]["name"] == name and i["metadata"].get("namespace") == namespace
                ),
                None,
            )
            if found is None:
                return 404, _status(404, "NotFound", f"{resource} {namespace}/{name} not found")
            if method == "PATCH":
                wanted = int(
                    (json.loads(body or b"{}").get("spec") or {}).get("replicas", found["spec"]["replicas"])
                )
                found["spec"]["replicas"] = wanted
                self._settle(objects, _KINDS[resource], namespace, name, wanted)
            replicas = found["spec"]["replicas"]
        return 200, {
            "kind": "Scale",
            "apiVersion": "autoscaling/v1",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"replicas": replicas},
            "status": {"replicas": replicas},
        }

    @staticmethod
    def _settle(
        objects: dict[str, list[dict[str, Any]]], kind: str, namespace: str, name: str, replicas: int
    ) -> None:
        """What the workload's controller does next: at zero replicas, its pods go."""
        if replicas:
            return
        owners = (
            {name}
            if kind == "StatefulSet"
            else {
                rs["metadata"]["name"]
                for rs in objects["replicasets"]
                if rs["metadata"].get("namespace") == namespace
                and any(o.get("name") == name for o in rs["metadata"].get("ownerReferences") or [])
            }
        )
        for rs in objects["replicasets"]:
            if rs["metadata"]["name"] in owners and kind == "Deployment":
                rs["spec"]["replicas"] = 0
        objects["pods"] = [
            p
            for p in objects["pods"]
            if not (
                p["metadata"].get("namespace") == namespace
                and any(o.get("name") in owners for o in p["metadata"].get("ownerReferences") or [])
            )
        ]

    # -- the server ---------------------------------------------------------------------------------------
    def __enter__(self) -> KubeResponder:
        responder = self

        class Handler(BaseHTTPRequestHandler):
            def _any(self) -> None:
                split = urlsplit(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                status, reply, headers = responder.respond(
                    self.command, split.path, parse_qs(split.query), body, self.headers.get("Authorization")
                )
                data = json.dumps(reply).encode()
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_PATCH = do_DELETE = do_POST = do_PUT = _any

            def log_message(self, *_: Any) -> None:
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        )
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


def _path_of(resource: str) -> str:
    return next(path for path, name in _LISTS.items() if name == resource)


def _status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
