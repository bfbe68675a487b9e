"""Verdicts about the organization itself: a member account and region a sweep could not reach."""

from __future__ import annotations

from datetime import datetime

from costguard.model import Finding, Reason, Resource, ResourceKind

# Refusals that retrying will not cure: the member role is missing, does not trust the hub, or lacks a grant.
PERMANENT_CODES = frozenset(
    {
        "AccessDenied",
        "AccessDeniedException",
        "UnauthorizedOperation",
        "AuthFailure",
        "InvalidClientTokenId",
        "UnrecognizedClientException",
        "OptInRequired",
        "NoSuchEntity",
    }
)


def member_region_key(account: str, region: str) -> str:
    return f"{account}/{region}"


def unreachable_finding(
    *,
    sweep: str,
    account: str,
    region: str,
    account_name: str | None,
    role_arn: str,
    error_code: str,
    error: str,
    now: datetime,
    event_id: str | None = None,
) -> Finding:
    """The sweep's item for one member account and region was refused: reported by name, never retried."""
    named = f"{account_name} ({account})" if account_name else account
    return Finding(
        reason=Reason.MEMBER_UNREACHABLE,
        resource=Resource(
            kind=ResourceKind.MEMBER_REGION,
            id=member_region_key(account, region),
            account=account,
            region=region,
            name=account_name,
        ),
        summary=(
            f"The {sweep} sweep could not look at account {named} in {region}: {error_code} ({error[:300]}). "
            f"Nothing there was judged. Check that member.yaml is deployed to that account and region (its role "
            f"{role_arn} must exist and trust this hub); the other accounts and regions were swept as usual."
        ),
        observed_at=now,
        evidence={"sweep": sweep, "error_code": error_code, "role": role_arn},
        repeat_scope=sweep,
        event_id=event_id,
    )
