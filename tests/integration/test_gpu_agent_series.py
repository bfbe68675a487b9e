"""The shipped agent configuration (template.yaml's GpuAgentConfig) and costguard's reads meet: the series an agent
publishes with it, on an EC2 host and (through the notebook on-start script's change) on a notebook instance, are
the ones the GPU sweep and the audit find and query, and costguard queries no CWAgent series it does not publish."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from moto import mock_aws

from costguard.audit.model import Subject
from costguard.audit.reading import queries_for
from costguard.aws import clients
from costguard.aws.metrics import GPU_NAMESPACE, gpu_queries, list_gpu_series
from costguard.aws.sagemaker import NOTEBOOK_DIMENSION
from costguard.local.template import Template
from costguard.model import Ec2Instance, ResourceKind
from tests.conftest import ROOT

REGION = "us-east-1"
HOST = "i-0a1f00000000000f1"
NOTEBOOK = "research-notebook"
GPUS = 4


def agent_config() -> dict[str, Any]:
    value = Template.load(ROOT / "template.yaml").resources["GpuAgentConfig"]["Properties"]["Value"]
    config: dict[str, Any] = json.loads(value)
    return config


def notebook_config() -> dict[str, Any]:
    """What the notebook on-start script makes of it (tests/template/test_gpu_agent.py runs the script)."""
    config = agent_config()
    del config["metrics"]["append_dimensions"]
    config["metrics"]["metrics_collected"]["nvidia_gpu"]["append_dimensions"] = {NOTEBOOK_DIMENSION: NOTEBOOK}
    return config


def publish(config: dict[str, Any], instance_id: str) -> set[tuple[str, str]]:
    """Put one datapoint per GPU and measurement as the agent would with ``config``: plugin nvidia_smi, its own
    dimensions (index, name, host) and the appended ones (${aws:InstanceId} resolved on the host). The
    (namespace, metric) pairs it published."""
    metrics = config["metrics"]
    section = metrics["metrics_collected"]["nvidia_gpu"]
    appended = {
        k: v.replace("${aws:InstanceId}", instance_id)
        for k, v in {**metrics.get("append_dimensions", {}), **section.get("append_dimensions", {})}.items()
    }
    namespace = metrics.get("namespace", "CWAgent")
    published = set()
    now = datetime.now(UTC)
    for measurement in section["measurement"]:
        name = f"nvidia_smi_{measurement}"
        published.add((namespace, name))
        data = [
            {
                "MetricName": name,
                "Dimensions": [
                    {"Name": k, "Value": v}
                    for k, v in {
                        "index": str(gpu),
                        "name": "NVIDIA A10G",
                        "host": "ip-10-0-0-1",
                        **appended,
                    }.items()
                ],
                "Timestamp": now - timedelta(minutes=1),
                "Value": 3.0,
            }
            for gpu in range(GPUS)
        ]
        clients.cloudwatch(REGION).put_metric_data(Namespace=namespace, MetricData=data)
    return published


@pytest.fixture
def aws() -> Iterator[None]:
    with mock_aws():
        yield


def _subject(kind: ResourceKind, resource_id: str) -> Subject:
    return Subject(
        kind=kind, id=resource_id, account="123456789012", region=REGION, instance_type="g5.12xlarge"
    )


def _read(queries: list[Any]) -> set[tuple[str, str]]:
    return {(q.namespace, q.metric) for q in queries if q.namespace == GPU_NAMESPACE}


def test_an_ec2_hosts_series_are_the_ones_the_sweep_and_the_audit_read(aws: None) -> None:
    published = publish(agent_config(), HOST)
    series = list_gpu_series(REGION, [HOST])
    assert len(series[HOST]) == GPUS, "one utilization series per GPU, found by InstanceId"
    host = Ec2Instance(
        id=HOST, type="g5.12xlarge", state="running", account="123456789012", region=REGION, launch_time=None
    )
    sweep = gpu_queries([host], series)
    assert len(sweep) == GPUS
    audit = queries_for(REGION, [_subject(ResourceKind.EC2_INSTANCE, HOST)])
    assert sum(q.namespace == GPU_NAMESPACE for q in audit) == 2 * GPUS  # utilization and memory per GPU
    assert _read(sweep) | _read(audit) == published


def test_a_notebooks_series_are_the_ones_the_sagemaker_sweep_and_the_audit_read(aws: None) -> None:
    published = publish(notebook_config(), "i-0notebookhost0001")
    series = list_gpu_series(REGION, [NOTEBOOK], dimension=NOTEBOOK_DIMENSION)
    assert len(series[NOTEBOOK]) == GPUS
    audit = queries_for(REGION, [_subject(ResourceKind.NOTEBOOK, NOTEBOOK)])
    assert _read(audit) == published
    assert not list_gpu_series(REGION, [HOST]), "a notebook's series carry no EC2 InstanceId"
