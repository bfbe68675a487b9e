"""EKS clusters and their Kubernetes API: the clusters in scope, a bearer token, and the few reads and writes the
EKS GPU sweep makes.

The Kubernetes client library is imported when a cluster is first reached, never at import: the other functions
of the stack share this package and must not pay for it at cold start.

Kubernetes reads and writes (what the user's RBAC manifest grants, docs/eks.md):

- list ``nodes``, ``pods``, ``namespaces``, ``replicasets``, ``statefulsets`` (cluster-wide, 500 to a page);
- ``get`` and ``patch`` of ``deployments/scale`` and ``statefulsets/scale``, in remediate mode only.

Nothing is ever deleted; no other write is made (costguard's marks live in its state table).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterator
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
    entry), ``forbidden`` (RBAC), ``unreachable`` (network, timeout) or ``not_active``."""

    def __init__(self, cause: str, detail: str) -> None:
        super().__init__(f"{cause}: {detail}")
        self.cause = cause
        self.detail = detail


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

    def __init__(self, cluster: EksCluster, token: str | None = None) -> None:
        if cluster.status and cluster.status != "ACTIVE":
            raise ClusterUnreachable("not_active", f"the cluster is {cluster.status}")
        if not cluster.public_endpoint:
            raise ClusterUnreachable(
                "private_endpoint",
                "its API endpoint is private and costguard's function runs outside its VPC",
            )
        from kubernetes import client

        self._client_module = client
        config = client.Configuration()
        config.host = cluster.endpoint
        config.api_key = {"authorization": token or bearer_token(cluster.name, cluster.region)}
        config.api_key_prefix = {"authorization": "Bearer"}
        config.retries = 1
        if cluster.certificate and cluster.endpoint.startswith("https://"):
            config.ssl_ca_cert = _ca_file(cluster.name, cluster.certificate)
        self.cluster = cluster
        self.api = client.ApiClient(config)
        self.core = client.CoreV1Api(self.api)
        self.apps = client.AppsV1Api(self.api)

    def _call(self, method: Callable[..., Any], *args: Any, **kwargs: Any) -> dict[str, Any]:
        """One call, its JSON answer; the client's errors turned into ClusterUnreachable."""
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        try:
            response = method(*args, _preload_content=False, _request_timeout=REQUEST_TIMEOUT, **kwargs)
        except ApiException as error:
            if error.status == 401:
                raise ClusterUnreachable("unauthorized", "the API refused costguard's token (401)") from None
            if error.status == 403:
                raise ClusterUnreachable("forbidden", _forbidden(error)) from None
            raise
        except (HTTPError, OSError) as error:
            raise ClusterUnreachable("unreachable", f"{type(error).__name__}: {str(error)[:200]}") from None
        answer: dict[str, Any] = json.loads(response.data or b"{}")
        return answer

    def _list(self, method: Callable[..., Any]) -> Iterator[dict[str, Any]]:
        token: str | None = None
        while True:
            page = self._call(method, limit=LIST_PAGE, **({"_continue": token} if token else {}))
            yield from page.get("items", [])
            token = (page.get("metadata") or {}).get("continue") or None
            if not token:
                return

    def nodes(self) -> list[dict[str, Any]]:
        return list(self._list(self.core.list_node))

    def pods(self) -> list[dict[str, Any]]:
        return list(self._list(self.core.list_pod_for_all_namespaces))

    def namespaces(self) -> list[dict[str, Any]]:
        return list(self._list(self.core.list_namespace))

    def replica_sets(self) -> list[dict[str, Any]]:
        return list(self._list(self.apps.list_replica_set_for_all_namespaces))

    def stateful_sets(self) -> list[dict[str, Any]]:
        return list(self._list(self.apps.list_stateful_set_for_all_namespaces))

    def replicas(self, kind: str, namespace: str, name: str) -> int:
        """The workload's desired replicas, from its ``scale`` subresource."""
        read = self.apps.read_namespaced_deployment_scale
        if kind == "StatefulSet":
            read = self.apps.read_namespaced_stateful_set_scale
        return int((self._call(read, name, namespace).get("spec") or {}).get("replicas") or 0)

    def scale(self, kind: str, namespace: str, name: str, replicas: int) -> None:
        """Set the workload's replicas through its ``scale`` subresource (a merge patch of spec.replicas)."""
        patch = self.apps.patch_namespaced_deployment_scale
        if kind == "StatefulSet":
            patch = self.apps.patch_namespaced_stateful_set_scale
        self._call(patch, name, namespace, {"spec": {"replicas": replicas}})


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
