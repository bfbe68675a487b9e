"""``data_cross_region``: a training job whose S3 input channels live in another region than the job (pure).

A job reads its input where it runs: a channel in a bucket of another region is billed as inter-region data
transfer, out of the bucket's region, for every byte read. In File mode each host copies its share once, at the
start; Pipe and FastFile read it again on every pass over the data (every epoch). A FullyReplicated channel is read
whole by each host, a ShardedByS3Key one once across the hosts. What the input weighs is not in the event: the
flow lists one page of the prefix (``InputSize``), and where that is unknown the alert states the price per GB
alone.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import urlparse

from costguard.detect.sagemaker import hourly_usd
from costguard.detect.training_jobs import training_job_resource
from costguard.events.sagemaker import TrainingJobDetail
from costguard.model import Finding, Reason
from costguard.pricing import Price
from costguard.pricing.transfer import TransferRate, transfer_rate

GIB = 2**30  # AWS bills data transfer per GB of 2^30 bytes
STREAMED_MODES = frozenset({"Pipe", "FastFile"})


@dataclass(frozen=True)
class S3Input:
    """One S3 channel of a job's InputDataConfig."""

    channel: str
    uri: str
    bucket: str
    prefix: str
    data_type: str  # S3Prefix; a ManifestFile or AugmentedManifestFile names a manifest, not the data
    replicated: bool  # FullyReplicated: every host reads all of it
    input_mode: str  # File, Pipe or FastFile


@dataclass(frozen=True)
class InputSize:
    """What the objects under a prefix weigh, from one listing page."""

    bytes: int
    objects: int
    complete: bool  # False: the prefix holds more than one page: at least this much

    @property
    def gib(self) -> float:
        return self.bytes / GIB


def s3_inputs(detail: TrainingJobDetail) -> list[S3Input]:
    """The job's S3 channels, in order; file-system channels and malformed URIs are left out."""
    default_mode = (
        detail.AlgorithmSpecification.TrainingInputMode if detail.AlgorithmSpecification else None
    ) or "File"
    found = []
    for n, channel in enumerate(detail.InputDataConfig):
        source = channel.DataSource.S3DataSource if channel.DataSource else None
        uri = source.S3Uri if source else None
        parsed = urlparse(uri or "")
        if source is None or parsed.scheme != "s3" or not parsed.netloc:
            continue
        found.append(
            S3Input(
                channel=channel.ChannelName or f"channel-{n + 1}",
                uri=str(uri),
                bucket=parsed.netloc,
                prefix=parsed.path.lstrip("/"),
                data_type=source.S3DataType or "S3Prefix",
                replicated=(source.S3DataDistributionType or "FullyReplicated") != "ShardedByS3Key",
                input_mode=channel.InputMode or default_mode,
            )
        )
    return found


def input_buckets(detail: TrainingJobDetail) -> list[str]:
    """The distinct buckets the job reads, in order: what the flow asks the region of."""
    return list(dict.fromkeys(i.bucket for i in s3_inputs(detail)))


def cross_region_finding(
    detail: TrainingJobDetail,
    *,
    account: str,
    region: str,
    bucket_regions: Mapping[str, str | None],
    sizes: Mapping[str, InputSize | None],
    price: Price | None,
    observed_at: datetime,
    event_id: str | None,
    rate_of: Callable[[str, str], TransferRate | None] = transfer_rate,
) -> Finding | None:
    """One finding naming every channel whose bucket is in another region (``bucket_regions``: None where the
    region could not be read, never judged), with the price per GB and, where ``sizes`` says what the channel
    weighs, what one pass over the data costs in transfer."""
    away = [i for i in s3_inputs(detail) if bucket_regions.get(i.bucket) not in (None, region)]
    if not away:
        return None
    resource = training_job_resource(detail, account=account, region=region)
    hosts = resource.instance_count
    rows = [_row(i, str(bucket_regions[i.bucket]), region, sizes.get(i.uri), hosts, rate_of) for i in away]
    known = [r["transfer_usd_per_pass"] for r in rows]
    total = round(sum(known), 2) if known and all(v is not None for v in known) else None
    at_least = any(r["size_complete"] is False for r in rows)
    buckets = {i.bucket: bucket_regions[i.bucket] for i in away}
    return Finding(
        reason=Reason.DATA_CROSS_REGION,
        resource=resource,
        summary=_summary(detail.TrainingJobName, region, buckets, rows, total, at_least),
        observed_at=observed_at,
        event_id=event_id,
        hourly_usd=hourly_usd(price, hosts),
        remediable=False,
        evidence={
            "job_region": region,
            "buckets": [f"{b} ({r})" for b, r in buckets.items()],
            "inputs": [_shown(r) for r in rows],
            "transfer_usd_per_pass": total,
            "transfer_per_pass_is_a_minimum": at_least or None,
            "rate_source": _rate_source(rows),
        },
    )


def _shown(row: dict[str, Any]) -> dict[str, Any]:
    """A channel's row as the evidence lists it: what is not known is left out, save the two figures."""
    kept = ("price_usd_per_gb", "transfer_usd_per_pass")
    shown = {k: v for k, v in row.items() if k != "rate_source" and (v is not None or k in kept)}
    if shown.pop("size_complete", None) is not False:
        return shown
    return shown | {"size_is_a_minimum": True}


def _row(
    item: S3Input,
    where: str,
    region: str,
    size: InputSize | None,
    hosts: int,
    rate_of: Callable[[str, str], TransferRate | None],
) -> dict[str, Any]:
    rate = rate_of(where, region)
    copies = hosts if item.replicated else 1
    read_gib = round(size.gib * copies, 2) if size is not None and item.data_type == "S3Prefix" else None
    usd = round(read_gib * rate.usd_per_gb, 2) if read_gib is not None and rate is not None else None
    return {
        "id": item.uri,
        "channel": item.channel,
        "bucket_region": where,
        "price_usd_per_gb": rate.usd_per_gb if rate else None,
        "input_mode": item.input_mode,
        "size_gib": round(size.gib, 2) if size is not None and item.data_type == "S3Prefix" else None,
        "size_complete": size.complete if size is not None and item.data_type == "S3Prefix" else None,
        "read_per_pass_gib": read_gib,
        "transfer_usd_per_pass": usd,
        "rate_source": rate.source if rate else None,
    }


def _rate_source(rows: list[dict[str, Any]]) -> str | None:
    sources = {r["rate_source"] for r in rows if r["rate_source"]}
    return next(iter(sources)) if len(sources) == 1 else (", ".join(sorted(sources)) or None)


def _summary(
    job: str,
    region: str,
    buckets: Mapping[str, str | None],
    rows: list[dict[str, Any]],
    total: float | None,
    at_least: bool,
) -> str:
    where = ", ".join(f"{b} ({r})" for b, r in buckets.items())
    rates = sorted({(r["bucket_region"], r["price_usd_per_gb"]) for r in rows})
    priced = "; ".join(
        f"data leaving {src} for {region} costs ${usd:.2f} per GB (estimate)"
        if usd is not None
        else f"no rate is known for data leaving {src} for {region}"
        for src, usd in rates
    )
    text = f"Training job {job} runs in {region} but reads its input from {where}: {priced}."
    if total is not None:
        gib = sum(r["read_per_pass_gib"] for r in rows)
        text += (
            f" One pass over the data reads {'at least ' if at_least else ''}{gib:,.1f} GiB across regions: "
            f"{'at least ' if at_least else ''}${total:,.2f}."
        )
    else:
        text += " What the input weighs is not known: the transfer cost follows from its size."
    modes = {r["input_mode"] for r in rows}
    if modes & STREAMED_MODES:
        text += " Pipe and FastFile read it again every epoch."
    if modes - STREAMED_MODES:
        text += " File mode copies it once, at the start, and again on every retry or new run."
    return text + f" Copy the data to a bucket in {region}, or run the job where the data is."
