"""A lazy, cached boto3 client factory: no client exists before its first use."""

from __future__ import annotations

from collections import Counter
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import boto3
from botocore.config import Config

if TYPE_CHECKING:
    from mypy_boto3_cloudwatch import CloudWatchClient
    from mypy_boto3_ec2 import EC2Client
    from mypy_boto3_pricing import PricingClient
    from mypy_boto3_sagemaker import SageMakerClient
    from mypy_boto3_sqs import SQSClient

# Standard retry mode backs off on throttling; adaptive adds client-side rate limiting for fleet scans.
_CONFIG = Config(retries={"mode": "adaptive", "max_attempts": 8}, connect_timeout=5, read_timeout=20)


# API calls made through this factory, by (service, operation): what scales, and what tests count.
calls: Counter[tuple[str, str]] = Counter()


def _count(model: Any, **_: Any) -> None:
    calls[(model.service_model.service_name, model.name)] += 1


@lru_cache(maxsize=64)
def client(service: str, region: str | None = None) -> Any:
    """One client per service and region for the life of the process."""
    made = boto3.session.Session().client(service, region_name=region, config=_CONFIG)  # type: ignore[call-overload]
    made.meta.events.register("before-call.*.*", _count)
    return made


def sqs(region: str | None = None) -> SQSClient:
    return client("sqs", region)  # type: ignore[no-any-return]


def ec2(region: str | None = None) -> EC2Client:
    return client("ec2", region)  # type: ignore[no-any-return]


def cloudwatch(region: str | None = None) -> CloudWatchClient:
    return client("cloudwatch", region)  # type: ignore[no-any-return]


def sagemaker(region: str | None = None) -> SageMakerClient:
    return client("sagemaker", region)  # type: ignore[no-any-return]


def pricing() -> PricingClient:
    # The Price List API is served from us-east-1 whatever region is priced.
    return client("pricing", "us-east-1")  # type: ignore[no-any-return]


def reset() -> None:
    """Forget every client (tests that switch endpoints or credentials)."""
    client.cache_clear()
