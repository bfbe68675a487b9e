"""AWS Compute Optimizer's recommendations for GPU instances: GetEC2InstanceRecommendations by instance ARN.

Asked from the hub, ``INSTANCE_ARNS_PER_CALL`` ARNs a call (the API documents no maximum; the hub is the
organization's management account or delegated administrator when it asks about a member's instances, which it
names with ``accountIds``). An account not opted in, or an instance Compute Optimizer has no recommendation for
(no CloudWatch agent GPU metrics, under 30 hours of history), gives no row: the audit says so. moto has no
Compute Optimizer: tests/unit/test_holdings_adapters.py holds this to the service model with botocore's Stubber.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from costguard.aws import clients
from costguard.permissions import needs

INSTANCE_ARNS_PER_CALL = 100
# compute-optimizer:GetEC2InstanceRecommendations takes no resource narrowing.
PERMISSIONS = needs("compute-optimizer:GetEC2InstanceRecommendations")
# Compute Optimizer answers these when an account is not opted in or not allowed: no recommendations, not a
# failure of the audit.
NOT_AVAILABLE = frozenset({"OptInRequiredException", "AccessDeniedException", "ResourceNotFoundException"})


def instance_arn(region: str, account: str, instance_id: str) -> str:
    return f"arn:aws:ec2:{region}:{account}:instance/{instance_id}"


def instance_recommendations(
    region: str, arns: Sequence[str], account: str | None = None
) -> tuple[list[dict[str, Any]], str | None]:
    """The recommendations for ``arns`` (as Compute Optimizer returns them) and, when Compute Optimizer could
    not answer for the account (not opted in, denied), why."""
    if not arns:
        return [], None
    optimizer = clients.client("compute-optimizer", region)
    found: list[dict[str, Any]] = []
    for start in range(0, len(arns), INSTANCE_ARNS_PER_CALL):
        request: dict[str, Any] = {"instanceArns": list(arns[start : start + INSTANCE_ARNS_PER_CALL])}
        if account:
            request["accountIds"] = [account]
        while True:
            try:
                answer = optimizer.get_ec2_instance_recommendations(**request)
            except optimizer.exceptions.ClientError as error:
                code = str(error.response.get("Error", {}).get("Code", ""))
                if code in NOT_AVAILABLE:
                    return found, f"Compute Optimizer did not answer: {code}"
                raise
            found.extend(answer.get("instanceRecommendations", []))
            token = answer.get("nextToken")
            if not token:
                break
            request["nextToken"] = token
    return found, None
