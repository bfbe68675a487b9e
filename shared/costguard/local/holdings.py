"""What the audit reads beside running resources, in the embedded AWS: the world's unattached volumes, its S3
objects, its finished training jobs' end times (seeded into moto), and Cost Explorer's Savings Plans coverage and
Compute Optimizer's recommendations (moto has neither: answered in-process from the world).

The answers are given to the real boto3 clients of the cached factory through local/responder.py, as
local/metric_responder.py does for CloudWatch: each request is still validated against the service model and counted in ``clients.calls``; only
the HTTP exchange is replaced.
"""

from __future__ import annotations

from typing import Any

from costguard.aws import clients
from costguard.aws.savings_plans import CE_REGION
from costguard.local.buckets import put_object
from costguard.local.org import place_client
from costguard.local.responder import Responder
from costguard.local.seed_metrics import naive_utc
from costguard.local.world import World

# Only the covered share of a family's spend is read from the coverage: each family is answered as this total.
NOMINAL_FAMILY_SPEND_USD = 1000.0


def seed_holdings(world: World) -> None:
    """Each place's volumes, objects and finished jobs' end times, into moto."""
    for place in world.places():
        _seed_volumes(place)
        _seed_objects(place)
        _seed_job_ends(place)


def _seed_volumes(place: World) -> None:
    if not place.volumes:
        return
    from moto.ec2.models import ec2_backends  # the embedded AWS only

    ec2: Any = place_client("ec2", place.account, place.region)
    backend = ec2_backends[place.account][place.region]
    for spec in place.volumes:
        made = ec2.create_volume(
            AvailabilityZone=spec.availability_zone or f"{place.region}a",
            Size=spec.size_gib,
            VolumeType=spec.type,
            **(
                {"TagSpecifications": [{"ResourceType": "volume", "Tags": _tags(spec.tags)}]}
                if spec.tags
                else {}
            ),
        )
        volume = backend.volumes.pop(made["VolumeId"])
        volume.id = spec.id  # the world's own id, as its report names it
        volume.create_time = naive_utc(spec.created or place.now)
        backend.volumes[spec.id] = volume
        if spec.tags:  # moto keys tags by resource id: move them to the world's id
            backend.tags[spec.id] = backend.tags.pop(made["VolumeId"], {})


def _seed_objects(place: World) -> None:
    for spec in place.objects:
        bucket, key = spec.uri.removeprefix("s3://").split("/", 1)
        put_object(
            place.account,
            place.region,
            bucket,
            key,
            size_gib=spec.size_gib,
            modified=spec.modified or place.now,
        )


def _seed_job_ends(place: World) -> None:
    ended = {job.name: job.ended for job in place.training_jobs if job.ended is not None}
    if not ended:
        return
    from moto.sagemaker.models import sagemaker_backends  # the embedded AWS only

    backend = sagemaker_backends[place.account][place.region]
    for name, at in ended.items():
        made = backend.training_jobs[name]
        made.training_end_time = made.last_modified_time = at


def _tags(tags: dict[str, str]) -> list[dict[str, str]]:
    return [{"Key": k, "Value": v} for k, v in tags.items()]


class HoldingsResponder:
    """GetSavingsPlansCoverage and GetEC2InstanceRecommendations answered from the world's places."""

    def __init__(self, world: World) -> None:
        self.places = {(p.account, p.region): p for p in world.places()}
        self._responder = Responder(
            {"GetSavingsPlansCoverage": self.coverage, "GetEC2InstanceRecommendations": self.recommendations},
            "https://holdings.invalid/",
        )

    def install(self) -> None:
        """On the hub's Cost Explorer client and its Compute Optimizer client of each of the world's regions."""
        self._responder.install(clients.client("ce", CE_REGION))
        for region in sorted({region for _, region in self.places}):
            self._responder.install(clients.client("compute-optimizer", region))

    def coverage(self, params: dict[str, Any]) -> dict[str, Any]:
        """Per family of the places the filter names (region, and linked account if given), its covered share
        of a nominal spend, over the asked period."""
        wanted = _filter_values(params.get("Filter") or {})
        period = params["TimePeriod"]
        rows = []
        for (account, region), place in sorted(self.places.items()):
            if region not in wanted.get("REGION", [region]) or account not in wanted.get(
                "LINKED_ACCOUNT", [account]
            ):
                continue
            # Like Cost Explorer, a row for every family with EC2 spend, 0% where the world names none.
            families = {i.type.split(".")[0]: 0.0 for i in place.instances if i.state == "running"}
            for family, percent in sorted((families | place.savings_plans_coverage).items()):
                covered = NOMINAL_FAMILY_SPEND_USD * percent / 100
                rows.append(
                    {
                        "Attributes": {"INSTANCE_FAMILY": family},
                        "Coverage": {
                            "SpendCoveredBySavingsPlans": f"{covered:.2f}",
                            "OnDemandCost": f"{NOMINAL_FAMILY_SPEND_USD - covered:.2f}",
                            "TotalCost": f"{NOMINAL_FAMILY_SPEND_USD:.2f}",
                            "CoveragePercentage": f"{percent:.2f}",
                        },
                        "TimePeriod": dict(period),
                    }
                )
        return {"SavingsPlansCoverages": rows}

    def recommendations(self, params: dict[str, Any]) -> dict[str, Any]:
        """The world's recommendations for the asked instance ARNs (none for an instance it says nothing of)."""
        found = []
        for arn in params.get("instanceArns", []):
            _, _, _, region, account, resource = arn.split(":", 5)
            place = self.places.get((account, region))
            instance = resource.removeprefix("instance/")
            for spec in place.compute_optimizer if place else []:
                if spec.instance != instance:
                    continue
                current = next((i.type for i in place.instances if i.id == instance), None) if place else None
                found.append(_recommendation(arn, account, current, spec))
        return {"instanceRecommendations": found, "errors": []}


def _recommendation(arn: str, account: str, current: str | None, spec: Any) -> dict[str, Any]:
    option: dict[str, Any] = {
        "rank": 1,
        "instanceType": spec.recommended_type or current or "",
        "performanceRisk": 1.0,
    }
    option["savingsOpportunity"] = {
        "estimatedMonthlySavings": {"currency": "USD", "value": spec.monthly_saving_usd},
        "savingsOpportunityPercentage": 0.0,
    }
    return {
        "instanceArn": arn,
        "accountId": account,
        "currentInstanceType": current or "",
        "finding": spec.finding,
        "idle": "True" if spec.idle else "False",
        "lookBackPeriodInDays": 14.0,
        "recommendationOptions": [option],
    }


def _filter_values(expression: dict[str, Any]) -> dict[str, list[str]]:
    """The dimension values a Cost Explorer filter names, flattened over ``And``."""
    found: dict[str, list[str]] = {}
    for part in [expression, *expression.get("And", [])]:
        dimension = part.get("Dimensions")
        if dimension:
            found[dimension["Key"]] = list(dimension.get("Values", []))
    return found
