"""data_cross_region, pure: which channels cross regions, the price per GB from the bundled table, and what one
pass over the data costs."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from costguard.detect.placement import GIB, InputSize, cross_region_finding, input_buckets, s3_inputs
from costguard.events.sagemaker import TrainingJobStateChange
from costguard.model import Reason
from costguard.pricing import Price
from costguard.pricing.transfer import transfer_rate, transfer_table
from tests.conftest import load_event

EVENT = "sagemaker-training-job-inprogress-cross-region.json"
EU_BUCKET = "recsys-datasets-eu-123456789012"
US_BUCKET = "recsys-datasets-123456789012"
TRAIN_URI = f"s3://{EU_BUCKET}/two-tower/clicks-2026-11/"


def _event(change: Any = None) -> TrainingJobStateChange:
    raw = copy.deepcopy(load_event(EVENT))
    if change is not None:
        change(raw["detail"])
    return TrainingJobStateChange.model_validate(raw)


def _finding(
    event: TrainingJobStateChange,
    regions: dict[str, str | None] | None = None,
    sizes: dict[str, InputSize | None] | None = None,
    price: Price | None = None,
) -> Any:
    return cross_region_finding(
        event.detail,
        account=event.account,
        region=event.region,
        bucket_regions=regions if regions is not None else {EU_BUCKET: "eu-west-1", US_BUCKET: "us-east-1"},
        sizes=sizes or {},
        price=price,
        observed_at=event.time,
        event_id=event.id,
    )


def test_the_channels_and_their_buckets_are_read_from_the_event() -> None:
    detail = _event().detail
    assert [(i.channel, i.bucket, i.prefix, i.replicated, i.input_mode) for i in s3_inputs(detail)] == [
        ("train", EU_BUCKET, "two-tower/clicks-2026-11/", True, "File"),
        ("validation", US_BUCKET, "two-tower/validation/", True, "File"),
    ]
    assert input_buckets(detail) == [EU_BUCKET, US_BUCKET]


def test_a_file_system_channel_and_a_malformed_uri_are_left_out() -> None:
    def change(detail: dict[str, Any]) -> None:
        detail["InputDataConfig"] += [
            {"ChannelName": "fsx", "DataSource": {"FileSystemDataSource": {"FileSystemId": "fs-0123"}}},
            {"ChannelName": "odd", "DataSource": {"S3DataSource": {"S3Uri": "https://example.com/x"}}},
        ]

    assert [i.channel for i in s3_inputs(_event(change).detail)] == ["train", "validation"]


def test_a_channel_in_another_region_names_its_bucket_region_and_price_per_gb() -> None:
    finding = _finding(_event())
    assert finding.reason is Reason.DATA_CROSS_REGION
    assert finding.remediable is False
    rate = transfer_table()["usd_per_gb_out"]["eu-west-1"]
    assert EU_BUCKET in finding.summary and "eu-west-1" in finding.summary
    assert f"${rate:.2f} per GB" in finding.summary
    assert "What the input weighs is not known" in finding.summary
    [row] = finding.evidence["inputs"]  # the validation channel is in the job's own region
    assert row["id"] == TRAIN_URI
    assert row["price_usd_per_gb"] == rate
    assert row["transfer_usd_per_pass"] is None
    assert finding.evidence["buckets"] == [f"{EU_BUCKET} (eu-west-1)"]


def test_the_transfer_of_one_pass_is_size_times_hosts_times_the_table_rate() -> None:
    size = InputSize(bytes=int(143.5 * GIB), objects=3, complete=True)
    price = Price(7.09, "table")
    finding = _finding(_event(), sizes={TRAIN_URI: size}, price=price)
    rate = transfer_table()["usd_per_gb_out"]["eu-west-1"]
    expected = round(143.5 * 2 * rate, 2)  # FullyReplicated: each of the 2 hosts reads all of it
    assert expected == 5.74
    assert finding.evidence["transfer_usd_per_pass"] == expected
    assert finding.evidence["inputs"][0]["read_per_pass_gib"] == 287.0
    assert f"${expected:,.2f}" in finding.summary
    assert finding.hourly_usd == round(7.09 * 2, 4)


def test_a_sharded_channel_is_read_once_across_the_hosts() -> None:
    def change(detail: dict[str, Any]) -> None:
        detail["InputDataConfig"][0]["DataSource"]["S3DataSource"]["S3DataDistributionType"] = (
            "ShardedByS3Key"
        )

    size = InputSize(bytes=100 * GIB, objects=10, complete=True)
    finding = _finding(_event(change), sizes={TRAIN_URI: size})
    assert finding.evidence["transfer_usd_per_pass"] == round(
        100 * transfer_rate("eu-west-1", "us-east-1").usd_per_gb, 2
    )  # type: ignore[union-attr]


def test_more_than_one_page_of_objects_is_a_minimum() -> None:
    size = InputSize(bytes=10 * GIB, objects=1000, complete=False)
    finding = _finding(_event(), sizes={TRAIN_URI: size})
    assert finding.evidence["transfer_per_pass_is_a_minimum"] is True
    assert finding.evidence["inputs"][0]["size_is_a_minimum"] is True
    assert "at least $" in finding.summary


def test_streamed_input_is_said_to_be_read_every_epoch() -> None:
    def change(detail: dict[str, Any]) -> None:
        detail["AlgorithmSpecification"]["TrainingInputMode"] = "FastFile"

    finding = _finding(_event(change))
    assert "every epoch" in finding.summary
    assert finding.evidence["inputs"][0]["input_mode"] == "FastFile"


def test_a_manifest_is_not_the_data_its_listing_size_is_not_used() -> None:
    def change(detail: dict[str, Any]) -> None:
        detail["InputDataConfig"][0]["DataSource"]["S3DataSource"]["S3DataType"] = "ManifestFile"

    finding = _finding(_event(change), sizes={TRAIN_URI: InputSize(bytes=GIB, objects=1, complete=True)})
    assert finding.evidence["transfer_usd_per_pass"] is None
    assert "size_gib" not in finding.evidence["inputs"][0]


@pytest.mark.parametrize(
    "regions",
    [
        {EU_BUCKET: "us-east-1", US_BUCKET: "us-east-1"},  # all in the job's region
        {EU_BUCKET: None, US_BUCKET: "us-east-1"},  # the region could not be read: never judged
        {},
    ],
)
def test_no_finding_without_a_channel_known_to_be_elsewhere(regions: dict[str, str | None]) -> None:
    assert _finding(_event(), regions=regions) is None


def test_a_region_the_table_does_not_price_is_unknown_never_zero() -> None:
    finding = _finding(
        _event(),
        regions={EU_BUCKET: "ap-southeast-1", US_BUCKET: "us-east-1"},
        sizes={TRAIN_URI: InputSize(bytes=GIB, objects=1, complete=True)},
    )
    assert finding.evidence["inputs"][0]["price_usd_per_gb"] is None
    assert finding.evidence["transfer_usd_per_pass"] is None
    assert "no rate is known for data leaving ap-southeast-1" in finding.summary


def test_transfer_rates_come_from_the_dated_table() -> None:
    table = transfer_table()
    assert table["as_of"] and table["urls"] and "ESTIMATE" in table["source"]
    assert transfer_rate("us-east-1", "us-east-1") is None
    assert transfer_rate("us-east-2", "us-east-1").usd_per_gb == 0.01  # type: ignore[union-attr]
    assert transfer_rate("us-west-2", "us-east-1").usd_per_gb == table["usd_per_gb_out"]["us-west-2"]  # type: ignore[union-attr]
    assert transfer_rate("sa-east-1", "us-east-1") is None  # not in the table: unknown, not borrowed
