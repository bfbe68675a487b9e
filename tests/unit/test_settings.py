"""Settings: read from COSTGUARD_* variables, validated, and named in every error."""

from __future__ import annotations

import pytest

from costguard.local.template import Template
from costguard.settings import Mode, SettingsError, parse_settings
from tests.conftest import ROOT


def test_defaults_are_notify_mode_and_dry_run() -> None:
    settings = parse_settings()
    assert settings.mode is Mode.NOTIFY
    assert settings.dry_run is True
    # The code's defaults are the template's, so a local run behaves as a default deployment.
    defaults = Template.load(ROOT / "template.yaml").parameter_defaults()
    assert settings.grace_minutes == int(defaults["GraceMinutes"])
    assert settings.max_stops_per_hour == int(defaults["MaxStopsPerHour"])
    assert settings.idle_threshold_percent == float(defaults["IdleThresholdPercent"])
    assert settings.price_source == "bundled"
    assert settings.regions == ()


def test_remediate_mode_turns_dry_run_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COSTGUARD_MODE", "remediate")
    settings = parse_settings()
    assert settings.mode is Mode.REMEDIATE
    assert settings.dry_run is False


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("COSTGUARD_MODE", "destroy"),
        ("COSTGUARD_GRACE_MINUTES", "-1"),
        ("COSTGUARD_PRICE_SOURCE", "x"),
    ],
)
def test_bad_value_raises_settings_error_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(SettingsError) as caught:
        parse_settings()
    assert variable in str(caught.value)
    assert isinstance(caught.value, ValueError)


def test_only_the_bad_variable_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COSTGUARD_MODE", "destroy")
    monkeypatch.setenv("COSTGUARD_GRACE_MINUTES", "45")
    with pytest.raises(SettingsError) as caught:
        parse_settings()
    assert "COSTGUARD_MODE" in str(caught.value)
    assert "COSTGUARD_GRACE_MINUTES" not in str(caught.value)


def test_regions_are_split_on_commas_and_stripped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COSTGUARD_REGIONS", "us-east-1, us-west-2")
    assert parse_settings().regions == ("us-east-1", "us-west-2")


def test_empty_region_items_are_dropped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COSTGUARD_REGIONS", " eu-west-1 ,, ")
    assert parse_settings().regions == ("eu-west-1",)


@pytest.mark.parametrize("rates", ["m", "m=", "=2", "m=-1", "m=nan", "m=inf", "m=ten", "m@OneMonth=1,n"])
def test_a_bedrock_rate_pricing_could_not_read_fails_at_start_named(rates: str) -> None:
    with pytest.raises(SettingsError, match="COSTGUARD_BEDROCK_THROUGHPUT_PRICES"):
        parse_settings(bedrock_throughput_prices=rates)


def test_the_bedrock_rates_the_settings_accept_are_those_pricing_reads() -> None:
    from costguard.pricing.bedrock import NO_COMMITMENT, parse_rates

    settings = parse_settings(
        bedrock_throughput_prices=" amazon.titan-text-express-v1=20.5, m@SixMonths=35 ,"
    )
    assert parse_rates(settings.bedrock_throughput_prices) == {
        ("amazon.titan-text-express-v1", NO_COMMITMENT): 20.5,
        ("m", "SixMonths"): 35.0,
    }
