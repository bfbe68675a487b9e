"""An organization played by the embedded AWS: Organizations with the world's account ids, names and OUs, the
member roles member.yaml would have created, and STS refusing a role that was never deployed, as AWS does."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import warnings
from collections.abc import Iterator
from typing import Any
from unittest import mock

import boto3

from costguard.aws import clients
from costguard.local.world import World

# What member.yaml's role trusts: the hub's function roles (the policy itself is checked in tests/template).
_TRUST = {
    "Version": "2012-10-17",
    "Statement": [{"Effect": "Allow", "Principal": {"AWS": "*"}, "Action": "sts:AssumeRole"}],
}


def place_client(service: str, account: str, region: str) -> Any:
    """A client that seeds one account of the embedded AWS directly (an administrator's, not the hub's): the
    hub's own account is the local stack's (MOTO_ACCOUNT_ID); another account's gets its own moto credentials."""
    if account == os.environ.get("MOTO_ACCOUNT_ID"):
        return clients._home_client(service, region)
    key = _seeding_key(account)
    return boto3.session.Session(
        aws_access_key_id=key[0], aws_secret_access_key=key[1], region_name=region
    ).client(service)  # type: ignore[call-overload]


@functools.lru_cache(maxsize=64)
def _seeding_key(account: str) -> tuple[str, str]:
    from moto.iam.models import iam_backends

    backend = iam_backends[account]["global"]
    backend.create_user(region_name="us-east-1", user_name="costguard-world-seeder", path="/", tags=[])
    made = backend.create_access_key("costguard-world-seeder")
    return made.access_key_id, made.secret_access_key


def seed_organization(world: World) -> None:
    """The organization, run from the hub (the management account), and the member roles where deployed."""
    _seeding_key.cache_clear()  # a new embedded AWS: earlier keys are gone
    org = world.organization
    if org is None:
        return
    from moto.organizations import utils

    organizations: Any = clients.client("organizations")
    with mock.patch.object(utils, "make_random_org_id", return_value=org.id):
        organizations.create_organization(FeatureSet="ALL")
    root = organizations.list_roots()["Roots"][0]["Id"]
    ous: dict[str, str] = {}
    for account in org.accounts:
        if account.ou and account.ou not in ous:
            with mock.patch.object(utils, "make_random_ou_id", return_value=account.ou):
                made = organizations.create_organizational_unit(ParentId=root, Name=account.ou)
            ous[account.ou] = made["OrganizationalUnit"]["Id"]
        if account.id != world.account:
            with mock.patch.object(utils, "make_random_account_id", return_value=account.id):
                organizations.create_account(
                    AccountName=account.name or account.id, Email=f"aws+{account.id}@example.com"
                )
        if account.ou:
            organizations.move_account(
                AccountId=account.id, SourceParentId=root, DestinationParentId=ous[account.ou]
            )
    _name_hub(world)
    for member in world.members:
        if member.role == "present":
            _create_role(member.account, f"{org.role}-{member.region}")


def _name_hub(world: World) -> None:
    """moto names the management account "master": give it the world's name."""
    from moto.organizations.models import organizations_backends

    assert world.organization is not None
    named = {a.id: a.name for a in world.organization.accounts if a.name}
    for backend in organizations_backends[world.account].values():
        for account in getattr(backend, "accounts", []):
            if account.id in named:
                account.name = named[account.id]


def _create_role(account: str, name: str) -> None:
    from moto.iam.models import iam_backends

    backend = iam_backends[account]["global"]
    backend.create_role(
        role_name=name,
        assume_role_policy_document=json.dumps(_TRUST),
        path="/",
        permissions_boundary=None,
        description="costguard member role (member.yaml)",
        tags=[],
        max_session_duration="3600",
    )


@contextlib.contextmanager
def play_organization() -> Iterator[None]:
    """Member credentials act in their own account, and AssumeRole of a role that does not exist in its account
    is AccessDenied (moto would allow any ARN). The local stack's own credentials stay the hub's
    (MOTO_ACCOUNT_ID)."""
    with warnings.catch_warnings(), _assumed_credentials_act_in_their_account(), _refuse_undeployed_roles():
        # moto's serializer knows no AccessDenied shape for STS: the refusal still reaches botocore as AWS sends it.
        warnings.filterwarnings("ignore", message=r"Exception\(STSClientError\)")
        yield


@contextlib.contextmanager
def _assumed_credentials_act_in_their_account() -> Iterator[None]:
    from moto.core.responses import BaseResponse
    from moto.iam.models import iam_backends

    original = BaseResponse.get_current_account

    def get_current_account(self: Any) -> str:
        key = self.get_access_key()
        for account_id, backends in list(iam_backends.items()):
            if any(key in backend.access_keys for backend in backends.values()):
                return str(account_id)
        return str(original(self))

    with mock.patch.object(BaseResponse, "get_current_account", get_current_account):
        yield


@contextlib.contextmanager
def _refuse_undeployed_roles() -> Iterator[None]:
    from moto.iam.models import iam_backends
    from moto.sts.exceptions import STSClientError
    from moto.sts.models import STSBackend

    original = STSBackend.assume_role

    def assume_role(
        self: Any, region_name: str, role_session_name: str, role_arn: str, *args: Any, **kw: Any
    ) -> Any:
        account, name = role_arn.split(":", 5)[4], role_arn.rsplit("/", 1)[-1]
        roles = iam_backends[account]["global"].roles.values()
        if not any(role.name == name for role in roles):
            raise STSClientError(
                "AccessDenied",
                f"User: arn:aws:sts::{self.account_id}:assumed-role/costguard/costguard is not authorized to "
                f"perform: sts:AssumeRole on resource: {role_arn}",
            )
        return original(self, region_name, role_session_name, role_arn, *args, **kw)

    with mock.patch.object(STSBackend, "assume_role", assume_role):
        yield
