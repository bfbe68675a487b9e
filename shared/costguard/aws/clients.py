"""A lazy, cached boto3 client factory: no client exists before its first use.

**Where a call lands.** costguard's own stores (DynamoDB, SQS, SNS, S3, Secrets Manager, Budgets, Cost Explorer,
Organizations, Pricing) are always the hub's, in the account the functions run in. The watched resources'
services (``MEMBER_SERVICES``: EC2, CloudWatch, CloudWatch Logs, SageMaker, Bedrock) are called in the account being looked at: the
``account`` argument, else the account of the work in hand (``acting_in``: a forwarded event's account, a sweep
item's account), else the hub's own. A member account, and the hub's own account outside the hub's region, is
reached through its ``<MemberRoleName>-<region>`` role (member.yaml), assumed once per account, region and
role-session lifetime (botocore refreshes the credentials before they expire); a single-account deployment (no
member role name) never assumes anything.

**What an import costs.** boto3 and botocore are imported by the first client built, not by this module: a
handler that rejects its event, or answers from its own state, never pays their ~150 ms of import.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import datetime
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from costguard.permissions import needs

if TYPE_CHECKING:
    import boto3
    from botocore.config import Config
    from mypy_boto3_cloudwatch import CloudWatchClient
    from mypy_boto3_ec2 import EC2Client
    from mypy_boto3_pricing import PricingClient
    from mypy_boto3_sagemaker import SageMakerClient
    from mypy_boto3_sqs import SQSClient


@lru_cache(maxsize=1)
def _config() -> Config:
    """Every client's config: standard retry mode backs off on throttling; adaptive adds client-side rate
    limiting for fleet scans."""
    from botocore.config import Config

    return Config(retries={"mode": "adaptive", "max_attempts": 8}, connect_timeout=5, read_timeout=20)


# The services whose calls act on the watched account's resources: reached through the member role.
MEMBER_SERVICES = frozenset({"ec2", "cloudwatch", "sagemaker", "bedrock", "logs"})
ROLE_SESSION_NAME = "costguard"
ROLE_SESSION_SECONDS = 3600
# Every function that calls the watched services may be asked to call them in a member account.
ASSUME_PERMISSIONS = needs("sts:AssumeRole")
HOME_ACCOUNT_ENV = "COSTGUARD_HOME_ACCOUNT"
MEMBER_ROLE_ENV = "COSTGUARD_MEMBER_ROLE_NAME"

# API calls made through this factory, by (service, operation): what scales, and what tests count.
calls: Counter[tuple[str, str]] = Counter()

_acting: ContextVar[str | None] = ContextVar("costguard_acting_account", default=None)


def _count(model: Any, **_: Any) -> None:
    calls[(model.service_model.service_name, model.name)] += 1


@contextmanager
def acting_in(account: str | None) -> Iterator[None]:
    """Calls to the watched services inside this block land in ``account`` (None: the hub's own)."""
    token = _acting.set(account)
    try:
        yield
    finally:
        _acting.reset(token)


def enter_account(account: str | None) -> None:
    """From here on in this invocation, the watched services' calls land in ``account`` (an entry point, once it
    has parsed its event: the next invocation's parse sets it again)."""
    _acting.set(account)


def acting_account() -> str | None:
    return _acting.get()


def member_role_name() -> str:
    return os.environ.get(MEMBER_ROLE_ENV, "").strip()


def home_account() -> str:
    return os.environ.get(HOME_ACCOUNT_ENV, "").strip()


def is_member(account: str | None, region: str | None = None) -> bool:
    """True when calls for ``account`` in ``region`` go through a member role: an organization deployment, and
    another account, or the hub's own account in another region (the hub's own role acts in its own region
    only; member.yaml is deployed to the hub's other regions too)."""
    if not account or not member_role_name():
        return False
    return account != home_account() or (region or _default_region()) != _default_region()


def member_role_arn(account: str, region: str) -> str:
    return f"arn:aws:iam::{account}:role/{member_role_name()}-{region}"


def client(service: str, region: str | None = None, account: str | None = None) -> Any:
    """One client per service, region and (for the watched services) account, for the life of the process."""
    target = account or _acting.get()
    if service in MEMBER_SERVICES and is_member(target, region):
        assert target is not None
        return _member_client(service, region or _default_region(), target)
    return _home_client(service, region)


@lru_cache(maxsize=4)
def _loader(data_path: str | None) -> Any:
    """botocore's data loader, one for the process: each session reads a service's model (a few MB of JSON) once
    through it, not once per session (a member account's session, or a client rebuilt after ``reset``)."""
    from botocore.loaders import create_loader

    return create_loader(data_path)


def _core_session() -> Any:
    """A botocore session of its own (credentials, configuration) whose service models are the process's."""
    import botocore.session

    core = botocore.session.get_session()
    core.register_component("data_loader", _loader(core.get_config_variable("data_path")))
    return core


@lru_cache(maxsize=64)
def _home_client(service: str, region: str | None) -> Any:
    import boto3.session

    session = boto3.session.Session(botocore_session=_core_session())
    made = session.client(service, region_name=region, config=_config())  # type: ignore[call-overload]
    made.meta.events.register("before-call.*.*", _count)
    return made


@lru_cache(maxsize=512)
def _member_client(service: str, region: str, account: str) -> Any:
    made = _member_session(account, region).client(service, region_name=region, config=_config())  # type: ignore[call-overload]
    made.meta.events.register("before-call.*.*", _count)
    return made


@lru_cache(maxsize=256)
def _member_session(account: str, region: str) -> boto3.session.Session:
    """A session whose credentials are the member role's, fetched at the first call and refreshed before they
    expire: one AssumeRole per account, region and role-session lifetime."""
    import boto3.session
    from botocore.credentials import DeferredRefreshableCredentials

    role_arn = member_role_arn(account, region)

    def assume() -> dict[str, str]:
        sts = _home_client("sts", region)  # the regional endpoint: no dependency on us-east-1
        answer = sts.assume_role(
            RoleArn=role_arn, RoleSessionName=ROLE_SESSION_NAME, DurationSeconds=ROLE_SESSION_SECONDS
        )["Credentials"]
        expiry = answer["Expiration"]
        return {
            "access_key": answer["AccessKeyId"],
            "secret_key": answer["SecretAccessKey"],
            "token": answer["SessionToken"],
            "expiry_time": expiry.isoformat() if isinstance(expiry, datetime) else str(expiry),
        }

    core = _core_session()
    credentials = DeferredRefreshableCredentials(refresh_using=assume, method="sts-assume-role")
    core._credentials = credentials  # botocore's way to hand a session credentials
    return boto3.session.Session(botocore_session=core, region_name=region)


def reach(account: str, region: str) -> None:
    """The member role's credentials for ``account`` and ``region``, fetched now if they are not held: raises the
    AssumeRole refusal (AccessDenied) where member.yaml is missing."""
    credentials = _member_session(account, region).get_credentials() if is_member(account, region) else None
    if credentials is not None:
        credentials.get_frozen_credentials()


def _default_region() -> str:
    return os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"


def sqs(region: str | None = None) -> SQSClient:
    return client("sqs", region)  # type: ignore[no-any-return]


def ec2(region: str | None = None, account: str | None = None) -> EC2Client:
    return client("ec2", region, account)  # type: ignore[no-any-return]


def cloudwatch(region: str | None = None, account: str | None = None) -> CloudWatchClient:
    return client("cloudwatch", region, account)  # type: ignore[no-any-return]


def sagemaker(region: str | None = None, account: str | None = None) -> SageMakerClient:
    return client("sagemaker", region, account)  # type: ignore[no-any-return]


def pricing() -> PricingClient:
    # The Price List API is served from us-east-1 whatever region is priced.
    return client("pricing", "us-east-1")  # type: ignore[no-any-return]


def reset() -> None:
    """Forget every client and member session (tests that switch endpoints or credentials)."""
    _home_client.cache_clear()
    _member_client.cache_clear()
    _member_session.cache_clear()
