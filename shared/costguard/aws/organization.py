"""The organization's accounts (AWS Organizations): which to sweep, and their names and OUs for messages.

One ListAccounts walk per process and hour; one ListParents per account named in a message, cached as long.
Only an organization deployment calls these; the hub must run in the management account or a delegated
administrator account for Organizations to answer.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from botocore.exceptions import ClientError

from costguard.aws import clients
from costguard.model import Finding
from costguard.observability import logger
from costguard.permissions import needs

LIST_PERMISSIONS = needs("organizations:ListAccounts")
PLACE_PERMISSIONS = needs("organizations:ListAccounts", "organizations:ListParents")

_TTL_SECONDS = 3600


@dataclass(frozen=True)
class Account:
    id: str
    name: str | None = None
    ou: str | None = None  # the OU (or root) it sits in, where asked for


class AccountDirectory:
    """The organization's accounts, read once an hour."""

    def __init__(self) -> None:
        self._accounts: dict[str, Account] = {}
        self._read_at: float | None = None
        self._parents: dict[str, str | None] = {}

    def active(self) -> list[Account]:
        """Every ACTIVE account, in the order Organizations lists them."""
        self._refresh()
        return list(self._accounts.values())

    def _refresh(self) -> None:
        if self._read_at is not None and time.monotonic() - self._read_at < _TTL_SECONDS:
            return
        found: dict[str, Account] = {}
        pages = clients.client("organizations").get_paginator("list_accounts").paginate()
        for page in pages:
            for item in page.get("Accounts", []):
                if item.get("Status", "ACTIVE") == "ACTIVE" and item.get("State", "ACTIVE") == "ACTIVE":
                    found[item["Id"]] = Account(item["Id"], item.get("Name"))
        self._accounts, self._read_at = found, time.monotonic()

    def describe(self, account: str) -> Account:
        """Its name and OU where Organizations tells them; the bare id where it cannot (logged, not raised: a
        message is worth more than its label)."""
        try:
            self._refresh()
            name = self._accounts.get(account, Account(account)).name
            if account not in self._parents:
                parents = clients.client("organizations").list_parents(ChildId=account).get("Parents", [])
                self._parents[account] = parents[0]["Id"] if parents else None
            return Account(account, name, self._parents[account])
        except ClientError as error:
            logger.warning(
                "organization account not described",
                extra={"account": account, "error": error.response.get("Error", {}).get("Code")},
            )
            self._parents.setdefault(account, None)
            return Account(account)


_directory: AccountDirectory | None = None


def directory() -> AccountDirectory:
    """The process's directory (built at first use)."""
    global _directory
    if _directory is None:
        _directory = AccountDirectory()
    return _directory


def reset() -> None:
    global _directory
    _directory = None


class AccountLabels(Protocol):
    def label(self, findings: Sequence[Finding]) -> list[Finding]: ...


class OrganizationLabels:
    """Each finding's account named (name, OU) from the organization: messages say whose it is, and a route may
    follow the account or its OU."""

    def __init__(self, accounts: AccountDirectory | None = None) -> None:
        self._accounts = accounts

    def label(self, findings: Sequence[Finding]) -> list[Finding]:
        accounts = self._accounts or directory()
        out = []
        for finding in findings:
            resource = finding.resource
            if resource.account_name is not None and resource.account_ou is not None:
                out.append(finding)
                continue
            found = accounts.describe(resource.account)
            labelled = resource.model_copy(
                update={"account_name": resource.account_name or found.name, "account_ou": found.ou}
            )
            out.append(finding.model_copy(update={"resource": labelled}))
        return out
