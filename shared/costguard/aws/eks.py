"""EKS clusters and their Kubernetes API: the clusters in scope, a bearer token, and the few reads and writes the
EKS GPU sweep makes.

The Kubernetes client library is imported when a cluster is first reached, never at import: the other functions
of the stack share this package and must not pay for it at cold start.

Kubernetes reads and writes (what the user's RBAC manifest grants, docs/eks.md):

- list ``nodes``, ``pods``, ``namespaces``, ``replicasets``, ``statefulsets`` (cluster-wide, 500 to a page);
- ``get`` and ``patch`` of ``deployments/scale`` and ``statefulsets/scale``, in remediate mode only.

Nothing is ever deleted; no other write is made (costguard's marks live in its state table).

What the API may answer instead (../shared/docs/aws-facts.md, "Kubernetes API"): a ``429`` with ``Retry-After`` is
waited out, at most ``THROTTLE_WAITS`` times a call and ``WAIT_BUDGET`` seconds a cluster; a ``410 Expired`` for a
stale ``continue`` token restarts the list from its beginning, once; any other error (or a 429 past those bounds)
is a ClusterUnreachable naming the status and what was being read: the sweep reports the cluster and moves on.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from costguard.aws import clients
from costguard.permissions import needs

PERMISSIONS = needs("eks:ListClusters", "eks:DescribeCluster")  # list_clusters

LIST_PAGE = 500  # items per Kubernetes list call: 800 pods are two calls
TOKEN_PREFIX = "k8s-aws-v1."  # noqa: S105 (the EKS token format's prefix, not a secret)
CLUSTER_ID_HEADER = "x-k8s-aws-id"
TOKEN_SECONDS = 60  # what `aws eks get-token` presigns for: the sweep asks for a new one per cluster
# Connect and read timeouts of each Kubernetes call (seconds): an endpoint that does not answer is reported, and
# the sweep moves on to the next cluster.
REQUEST_TIMEOUT = (3.0, 20.0)
SCALABLE = {"Deployment": "deployments", "StatefulSet": "statefulsets"}
THROTTLE_WAITS = 2  # a call answered 429 is tried again after its Retry-After at most this many times
MAX_RETRY_AFTER = 10.0  # seconds: a longer Retry-After is waited this long
WAIT_BUDGET = 30.0  # seconds of Retry-After waits per cluster and sweep; past it the cluster is given up
DEFAULT_RETRY_AFTER = 1.0  # seconds, for a 429 without a (readable) Retry-After
EXPIRED = 410
THROTTLED = 429


@dataclass(frozen=True)
class EksCluster:
    """One cluster as DescribeCluster tells it."""

    name: str
    arn: str
    account: str
    region: str
    endpoint: str
    certificate: str | None  # base64 PEM of the cluster's CA
    status: str
    public_endpoint: bool = True
    authentication_mode: str | None = None  # API, API_AND_CONFIG_MAP or CONFIG_MAP (no access entries)
    tags: dict[str, str] = field(default_factory=dict)


class ClusterUnreachable(Exception):
    """The cluster's API could not be read: ``cause`` is one of ``private_endpoint``, ``unauthorized`` (no access
    entry), ``forbidden`` (RBAC), ``unreachable`` (network, timeout), ``not_active``, ``api_error`` (any other
    HTTP status; ``status`` holds it) or ``bad_answer`` (an answer or object that cannot be read)."""

    def __init__(self, cause: str, detail: str, status: int | None = None) -> None:
        super().__init__(f"{cause}: {detail}")
        self.cause = cause
        self.detail = detail
        self.status = status


def list_clusters(region: str) -> list[EksCluster]:
    """Every cluster of the region: one ListClusters page per 100 clusters, one DescribeCluster each."""
    eks = clients.client("eks", region)
    names = [n for page in eks.get_paginator("list_clusters").paginate() for n in page.get("clusters", [])]
    found = []
    for name in names:
        described = eks.describe_cluster(name=name)["cluster"]
        arn = str(described.get("arn", ""))
        vpc = described.get("resourcesVpcConfig") or {}
        found.append(
            EksCluster(
                name=name,
                arn=arn,
                account=arn.split(":")[4] if arn.count(":") >= 5 else "",
                region=region,
                endpoint=str(described.get("endpoint") or ""),
                certificate=(described.get("certificateAuthority") or {}).get("data"),
                status=str(described.get("status", "")),
                public_endpoint=bool(vpc.get("endpointPublicAccess", True)),
                authentication_mode=(described.get("accessConfig") or {}).get("authenticationMode"),
                tags=dict(described.get("tags") or {}),
            )
        )
    return found


def bearer_token(cluster: str, region: str) -> str:
    """What `aws eks get-token` makes: a presigned STS GetCallerIdentity URL that signs the cluster's name in the
    ``x-k8s-aws-id`` header, base64url without padding, after ``k8s-aws-v1.``. Presigning makes no call."""
    import botocore.session
    from botocore.model import ServiceId
    from botocore.signers import RequestSigner

    session = botocore.session.get_session()
    credentials = session.get_credentials()
    if credentials is None:
        raise ClusterUnreachable("unauthorized", "no AWS credentials to sign the cluster's token with")
    signer = RequestSigner(
        ServiceId("sts"),
        region,
        "sts",
        "v4",
        credentials,
        session.get_component("event_emitter"),
    )
    request = {
        "method": "GET",
        "url": f"https://sts.{region}.amazonaws.com/?Action=GetCallerIdentity&Version=2011-06-15",
        "body": {},
        "headers": {CLUSTER_ID_HEADER: cluster},
        "context": {},
    }
    url = signer.generate_presigned_url(
        request, region_name=region, expires_in=TOKEN_SECONDS, operation_name=""
    )
    return TOKEN_PREFIX + base64.urlsafe_b64encode(url.encode()).decode().rstrip("=")


class KubeApi:
    """One cluster's Kubernetes API through the official client: plain JSON in, plain dicts out."""

    def __init__(self, cluster: EksCluster, token: str | None = None, *, in_vpc: bool = False) -> None:
        """``in_vpc``: the function runs in the clusters' VPC (EksSubnetIds), so a private endpoint is reached;
        outside it, a cluster whose endpoint is private only is refused without a call."""
        if cluster.status and cluster.status != "ACTIVE":
            raise ClusterUnreachable("not_active", f"the cluster is {cluster.status}")
        if not cluster.public_endpoint and not in_vpc:
            raise ClusterUnreachable(
                "private_endpoint",
                "its API endpoint is private and costguard's function runs outside its VPC "
                "(name EksSubnetIds and EksSecurityGroupIds to run it there: docs/eks.md)",
            )
        from kubernetes import client
        from urllib3.util.retry import Retry

        self._client_module = client
        config = client.Configuration()
        config.host = cluster.endpoint
        config.api_key = {"authorization": token or bearer_token(cluster.name, cluster.region)}
        config.api_key_prefix = {"authorization": "Bearer"}
        # One retry of a dropped connection; statuses (a 429's Retry-After included) are this class's to handle.
        config.retries = Retry(total=1, status=0, respect_retry_after_header=False, raise_on_status=False)
        if cluster.certificate and cluster.endpoint.startswith("https://"):
            config.ssl_ca_cert = _ca_file(cluster.name, cluster.certificate)
        self.cluster = cluster
        self.waited = 0.0  # seconds of Retry-After waited for this cluster
        self.api = client.ApiClient(config)
        self.core = client.CoreV1Api(self.api)
        self.apps = client.AppsV1Api(self.api)

    def _call(self, what: str, method: Callable[..., Any], *args: Any, **kwargs: Any) -> dict[str, Any]:
        """One call, its JSON answer; a 429 waited out (bounded), other errors turned into ClusterUnreachable."""
        from kubernetes.client.exceptions import ApiException

        waits = 0
        while True:
            try:
                return self._once(what, method, *args, **kwargs)
            except ApiException as error:
                if error.status != THROTTLED or waits >= THROTTLE_WAITS:
                    raise _refused(what, error, waits) from None
                pause = _retry_after(error)
                if self.waited + pause > WAIT_BUDGET:
                    raise _refused(what, error, waits) from None
                waits += 1
                self.waited += pause
                time.sleep(pause)

    def _once(self, what: str, method: Callable[..., Any], *args: Any, **kwargs: Any) -> dict[str, Any]:
        from urllib3.exceptions import HTTPError

        try:
            response = method(*args, _preload_content=False, _request_timeout=REQUEST_TIMEOUT, **kwargs)
        except (HTTPError, OSError) as error:
            raise ClusterUnreachable("unreachable", f"{type(error).__name__}: {str(error)[:200]}") from None
        try:
            answer = json.loads(response.data or b"{}")
        except ValueError:
            raise ClusterUnreachable("bad_answer", f"{what}: the answer is not JSON") from None
        if not isinstance(answer, dict):
            raise ClusterUnreachable("bad_answer", f"{what}: the answer is not a JSON object")
        return answer

    def _list(self, what: str, method: Callable[..., Any]) -> list[dict[str, Any]]:
        """Every item of a list, LIST_PAGE at a time; restarted from its beginning once if a continue token
        expires (410) before the last page."""
        for attempt in (1, 2):
            items: list[dict[str, Any]] = []
            token: str | None = None
            try:
                while True:
                    page = self._call(
                        what, method, limit=LIST_PAGE, **({"_continue": token} if token else {})
                    )
                    items += _items(what, page)
                    token = (page.get("metadata") or {}).get("continue") or None
                    if not token:
                        return items
            except ClusterUnreachable as error:
                if error.status != EXPIRED or token is None or attempt == 2:
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    def nodes(self) -> list[dict[str, Any]]:
        return self._list("listing nodes", self.core.list_node)

    def pods(self) -> list[dict[str, Any]]:
        return self._list("listing pods", self.core.list_pod_for_all_namespaces)

    def namespaces(self) -> list[dict[str, Any]]:
        return self._list("listing namespaces", self.core.list_namespace)

    def replica_sets(self) -> list[dict[str, Any]]:
        return self._list("listing replicasets", self.apps.list_replica_set_for_all_namespaces)

    def stateful_sets(self) -> list[dict[str, Any]]:
        return self._list("listing statefulsets", self.apps.list_stateful_set_for_all_namespaces)

    def replicas(self, kind: str, namespace: str, name: str) -> int:
        """The workload's desired replicas, from its ``scale`` subresource."""
        read = self.apps.read_namespaced_deployment_scale
        if kind == "StatefulSet":
            read = self.apps.read_namespaced_stateful_set_scale
        answer = self._call(f"reading the scale of {kind} {namespace}/{name}", read, name, namespace)
        return int((answer.get("spec") or {}).get("replicas") or 0)

    def scale(self, kind: str, namespace: str, name: str, replicas: int) -> None:
        """Set the workload's replicas through its ``scale`` subresource (a merge patch of spec.replicas)."""
        patch = self.apps.patch_namespaced_deployment_scale
        if kind == "StatefulSet":
            patch = self.apps.patch_namespaced_stateful_set_scale
        self._call(
            f"scaling {kind} {namespace}/{name}", patch, name, namespace, {"spec": {"replicas": replicas}}
        )


def _items(what: str, page: dict[str, Any]) -> list[dict[str, Any]]:
    items = page.get("items") or []
    if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
        raise ClusterUnreachable("bad_answer", f"{what}: its items are not a list of objects")
    return items


def _retry_after(error: Any) -> float:
    """A 429's Retry-After in seconds (delta-seconds form), within [0, MAX_RETRY_AFTER]."""
    headers = getattr(error, "headers", None) or {}
    try:
        seconds = float(headers.get("Retry-After", DEFAULT_RETRY_AFTER))
    except (TypeError, ValueError):
        seconds = DEFAULT_RETRY_AFTER
    return min(max(seconds, 0.0), MAX_RETRY_AFTER)


def _refused(what: str, error: Any, waits: int) -> ClusterUnreachable:
    """The ClusterUnreachable for an error status: what was being read, the status, the API's message."""
    status = int(error.status or 0)
    if status == 401:
        return ClusterUnreachable("unauthorized", "the API refused costguard's token (401)", status)
    if status == 403:
        return ClusterUnreachable("forbidden", _forbidden(error), status)
    try:
        message = str(json.loads(error.body or "{}").get("message", ""))[:200]
    except (AttributeError, TypeError, ValueError):
        message = ""
    after = f" after {waits} Retry-After wait{'s' if waits != 1 else ''}" if waits else ""
    said = f": {message}" if message else ""
    reason = f" {error.reason}" if getattr(error, "reason", None) else ""
    return ClusterUnreachable("api_error", f"{what} answered {status}{reason}{after}{said}", status)


def _forbidden(error: Any) -> str:
    try:
        message = json.loads(error.body or "{}").get("message", "")
    except (TypeError, ValueError):
        message = ""
    return f"RBAC refused a call (403): {str(message)[:200]}"


def _ca_file(cluster: str, data: str) -> str:
    """The cluster's CA as a file the client can verify against (one per cluster, in the function's /tmp)."""
    import hashlib
    import tempfile
    from pathlib import Path

    pem = base64.b64decode(data)
    path = Path(tempfile.gettempdir()) / f"costguard-eks-{hashlib.sha256(pem).hexdigest()[:16]}.pem"
    if not path.exists():
        path.write_bytes(pem)
    return str(path)
