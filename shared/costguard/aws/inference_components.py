"""The inference components an endpoint hosts: ListInferenceComponents, one paginated walk per region and sweep
(its summaries name each component's endpoint). An endpoint hosting them publishes its Invocations per
InferenceComponentName, not per endpoint and variant, so the SageMaker sweep reads them there.

moto implements no inference-component call: the local stack serves ``in_service`` from the world file
(local/inference_components.py), and the real call is tested with botocore's Stubber against the SageMaker service
model (tests/unit/test_evidence_silence_adapters.py)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from costguard.aws import clients
from costguard.permissions import needs

PAGE = 100  # ListInferenceComponents' MaxResults
IN_SERVICE = "InService"

PERMISSIONS = needs("sagemaker:ListInferenceComponents")


def in_service(region: str) -> dict[str, tuple[str, ...]]:
    """The InService inference components of the region, by the name of the endpoint hosting them."""
    sagemaker: Any = clients.sagemaker(region)
    found: dict[str, list[str]] = defaultdict(list)
    for page in sagemaker.get_paginator("list_inference_components").paginate(
        StatusEquals=IN_SERVICE, PaginationConfig={"PageSize": PAGE}
    ):
        for item in page.get("InferenceComponents", []):
            if item.get("InferenceComponentStatus", IN_SERVICE) == IN_SERVICE:
                found[item["EndpointName"]].append(item["InferenceComponentName"])
    return {name: tuple(sorted(components)) for name, components in found.items()}
