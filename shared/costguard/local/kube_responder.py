"""A local HTTP server that plays the Kubernetes API of a world's EKS clusters: the few endpoints costguard calls,
so that the real Kubernetes client's code path runs (URL building, paging, bearer token, patch).

Each cluster is served under ``/clusters/<name>``, which the embedded EKS gives as the cluster's endpoint. The
bearer token must be an EKS token (a presigned STS GetCallerIdentity URL signing ``x-k8s-aws-id``); a cluster
without an access entry answers 401. Only reads and the ``scale`` subresource are answered: any other write (a
delete above all) is refused with 405 and counted, so that tests can say none was made.
"""

from __future__ import annotations

import base64
import json
import re
import threading
from collections import Counter
from collections.abc import Iterable
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
                status, reply = responder.answer(
                    self.command, split.path, parse_qs(split.query), body, self.headers.get("Authorization")
                )
                data = json.dumps(reply).encode()
                self.send_response(status)
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


def _status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
