"""The one settings model, read from the environment and validated at start-up."""

from __future__ import annotations

import os
from enum import StrEnum
from functools import lru_cache

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from costguard.detect.escalation import DEFAULT_ESCALATION, parse_levels
from costguard.policy import parse_reason_modes, parse_scope
from costguard.pricing.bedrock import parse_rates

ENV_PREFIX = "COSTGUARD_"
# One of COSTGUARD_BEDROCK_THROUGHPUT_PRICES' entries: model-id[@commitment]=usd.
# The states of a future-dated capacity reservation that EventBridge reports ("EC2 Capacity Reservation <State>").
CAPACITY_STATES = ("scheduled", "active", "delayed", "unsupported", "failed", "expired", "cancelled")


class Mode(StrEnum):
    NOTIFY = "notify"
    REMEDIATE = "remediate"


class SettingsError(ValueError):
    """A setting is missing or invalid; the message names the environment variable."""


class Settings(BaseModel):
    """Everything a costguard function reads from its environment.

    Each field is read from ``COSTGUARD_<FIELD NAME IN UPPER CASE>`` (the name's case does not matter), as the
    text the variable holds; a value given to the constructor wins over the environment's. Lists are
    comma-separated. (pydantic-settings reads an environment the same way, but loads asyncio and its CLI and
    cloud sources with it: tens of milliseconds of every function's cold start for one prefix.)
    """

    model_config = ConfigDict(extra="ignore", frozen=True)

    mode: Mode = Mode.NOTIFY
    reason_modes: str = Field(
        default="",
        description="reasons with a mode of their own, comma-separated <reason code>=<notify|remediate> "
        "(gpu_idle=remediate,notebook_idle=notify); the rest follow mode",
    )
    remediate_scope: str = Field(
        default="",
        description="the resources acted on, by tag: <key>=<value>[|<value>...] or <key>!=<value>[|...], "
        "comma-separated clauses that all hold (team!=research); any other is only reported. Empty: all",
    )
    protect_tag_key: str = Field(default="costguard:protect", min_length=1, max_length=128)
    routing_tag_key: str = Field(default="team", min_length=1, max_length=128)
    slack_secret_id: str = Field(
        default="", description="Secrets Manager id or ARN of the Slack webhook secret"
    )
    slack_buttons: bool = Field(
        default=True,
        description="messages carry buttons: on when the Slack app's interactions endpoint is deployed (SlackApp=on)",
    )
    decisions_queue_url: str = ""
    urgent_queue_url: str = Field(
        default="",
        description="stops made and budgets breached, told without the batching window (empty: none)",
    )
    failed_events_queue_url: str = ""
    state_table: str = ""
    dedupe_window_minutes: int = Field(default=240, ge=0, le=7 * 24 * 60)
    ledger_retention_days: int = Field(
        default=400,
        ge=1,
        le=3650,
        description="how long the savings ledger keeps an action (act/ledger_book.py)",
    )
    slack_group_above: int = Field(
        default=3, ge=0, le=10000, description="More notices than this for one channel at once: one message"
    )
    grace_minutes: int = Field(default=15, ge=0, le=7 * 24 * 60)
    max_stops_per_run: int = Field(default=5, ge=0, le=1000)
    max_stops_per_hour: int = Field(default=20, ge=0, le=10000)
    idle_threshold_percent: float = Field(default=5.0, ge=0, le=100)
    idle_window_minutes: int = Field(default=30, ge=5, le=24 * 60)
    starved_threshold_percent: float = Field(default=70.0, ge=0, le=100)
    idle_policy: str = Field(
        default="fixed",
        pattern="^(fixed|adaptive)$",
        description="fixed: the idle window and grace; adaptive: learned per instance (detect/adaptive.py)",
    )
    interruption_cost_usd: float = Field(
        default=25.0, ge=0, le=100000, description="adaptive: what interrupting work (a near-miss) costs"
    )
    adaptive_floor_minutes: int = Field(default=30, ge=5, le=24 * 60)
    adaptive_horizon_minutes: int = Field(default=60, ge=5, le=24 * 60)
    starved_window_minutes: int = Field(default=120, ge=5, le=7 * 24 * 60)
    read_schedule: bool = Field(
        default=True,
        description="on: the sweep reads an instance's GPU metrics only when a finding could have come "
        "(detect/read_schedule.py); off: every instance at every sweep",
    )
    eks_in_vpc: bool = Field(
        default=False,
        description="the EKS function runs in the clusters' VPC (EksSubnetIds): private API endpoints are reached",
    )
    gpu_alarms: bool = Field(
        default=False,
        description="on: one GPU-idle alarm per running GPU instance (GpuAlarms); off: the 5-minute sweep alone",
    )
    endpoint_idle_hours: int = Field(default=24, ge=1, le=30 * 24)
    price_source: str = Field(default="bundled", pattern="^(bundled|live)$")
    batch_retry_threshold: int = Field(default=2, ge=1, le=10)
    batch_queue_failure_threshold: int = Field(default=3, ge=1, le=1000)
    batch_queue_window_hours: int = Field(default=6, ge=1, le=7 * 24)
    spot_interruption_threshold: int = Field(default=3, ge=1, le=1000)
    spot_interruption_window_hours: int = Field(default=24, ge=1, le=30 * 24)
    failure_loop_threshold: int = Field(default=3, ge=2, le=100)
    failure_loop_window_hours: int = Field(default=6, ge=1, le=7 * 24)
    cost_warning_share: float = Field(default=0.8, gt=0, le=1)
    default_job_max_usd: float = Field(default=0.0, ge=0, description="0: no default cost ceiling")
    default_job_max_hours: float = Field(default=0.0, ge=0, description="0: no default time ceiling")
    max_runtime_hours: float = Field(default=72.0, gt=0, le=28 * 24)
    spot_recommend_hours: float = Field(default=4.0, gt=0, le=28 * 24)
    divergence_window_minutes: int = Field(
        default=60, ge=5, le=24 * 60, description="a loss rising over this window is training_diverged"
    )
    plateau_tolerance: float = Field(
        default=0.01, ge=0, le=1, description="relative improvement of a loss below which it is not improving"
    )
    plateau_share: float = Field(
        default=0.5, ge=0.05, le=1, description="the share of the run, to now, with no improvement: a plateau"
    )
    checkpoint_stale_minutes: int = Field(
        default=30, ge=5, le=7 * 24 * 60, description="a checkpoint location with no new object for this long"
    )
    capacity_window_hours: int = Field(default=24, ge=1, le=14 * 24)
    capacity_idle_threshold_percent: float = Field(default=20.0, ge=0, le=100)
    capacity_block_idle_minutes: int = Field(default=30, ge=5, le=24 * 60)
    bedrock_idle_hours: int = Field(
        default=24, ge=1, le=30 * 24, description="a Provisioned Throughput not invoked for this long is idle"
    )
    hyperpod_idle_hours: int = Field(
        default=24,
        ge=1,
        le=30 * 24,
        description="a HyperPod node whose GPUs stayed idle this long is reported with its group (hyperpod_idle)",
    )
    bedrock_throughput_prices: str = Field(
        default="",
        description="your Provisioned Throughput rates per model unit-hour: 'model-id[@commitment]=usd', "
        "comma-separated (pricing/bedrock.py); a model without one is priced from the bundled table, else unknown",
    )
    capacity_state_notices: tuple[str, ...] = Field(
        default=CAPACITY_STATES,
        description="future-dated reservation states that give a message; empty: none",
    )
    budget_escalation: str = Field(
        default=DEFAULT_ESCALATION,
        description="What a budget breach allows: comma-separated '<forecast|actual>[>=PERCENT]:<action>'",
    )
    regions: tuple[str, ...] = ()
    home_account: str = Field(
        default="", pattern=r"^([0-9]{12})?$", description="the account the stack runs in (the hub's)"
    )
    member_role_name: str = Field(
        default="",
        pattern=r"^([A-Za-z0-9+=,.@_-]{1,40})?$",
        description="an organization deployment: member.yaml's role name prefix (<name>-<region>); empty: "
        "this account only",
    )
    accounts: tuple[str, ...] = Field(
        default=(),
        description="an organization deployment's accounts to sweep; empty: every ACTIVE account of the "
        "organization (organizations:ListAccounts)",
    )
    sweep_queue_url: str = Field(
        default="", description="an organization sweep's work items, one per account and region"
    )
    sweep_concurrency: int = Field(
        default=20,
        ge=2,
        le=1000,
        description="an organization sweep's work queue: the most invocations at once (the event source "
        "mapping's MaximumConcurrency); its items are sized to finish within the sweep's interval at it",
    )
    audit_bucket: str = Field(default="", description="S3 bucket of the right-sizing audit's reports")
    audit_lookback_days: int = Field(default=14, ge=1, le=63)
    audit_rules_key: str = Field(
        default="", description="S3 key, in the audit bucket, of a JSON file overriding audit rules"
    )
    audit_link_hours: int = Field(default=12, ge=1, le=168)
    required_tags: tuple[str, ...] = Field(
        default=(),
        description="cost-allocation tag keys every GPU or accelerator resource must carry "
        "(COSTGUARD_REQUIRED_TAGS, e.g. team,project,owner): the audit's table, and an alert at an EC2 instance's or "
        "training job's launch; empty: not checked, since tagging conventions "
        "differ between accounts and a guessed list would flag every resource of an account that uses others",
    )

    @model_validator(mode="before")
    @classmethod
    def _from_environment(cls, given: object) -> object:
        if not isinstance(given, dict):
            return given
        prefix = ENV_PREFIX.lower()
        environment = {k.lower(): v for k, v in os.environ.items() if k.lower().startswith(prefix)}
        found = {
            name: environment[prefix + name] for name in cls.model_fields if prefix + name in environment
        }
        return found | given

    @field_validator("bedrock_throughput_prices")
    @classmethod
    def _valid_rates(cls, value: str) -> str:
        parse_rates(value)  # read as pricing/bedrock.py reads it: a bad rate fails at cold start, named
        return value

    @field_validator("budget_escalation")
    @classmethod
    def _valid_escalation(cls, value: str) -> str:
        parse_levels(value)  # a bad level fails at cold start, named
        return value

    @field_validator("reason_modes")
    @classmethod
    def _valid_reason_modes(cls, value: str) -> str:
        parse_reason_modes(value)  # a bad entry fails at cold start, named
        return value

    @field_validator("remediate_scope")
    @classmethod
    def _valid_scope(cls, value: str) -> str:
        parse_scope(value)
        return value

    @field_validator("regions", mode="before")
    @classmethod
    def _split_regions(cls, value: object) -> object:
        if isinstance(value, str):
            return tuple(part.strip() for part in value.split(",") if part.strip())
        return value

    @field_validator("required_tags", mode="before")
    @classmethod
    def _split_tags(cls, value: object) -> object:
        if isinstance(value, str):
            return tuple(dict.fromkeys(part.strip() for part in value.split(",") if part.strip()))
        return value

    @field_validator("accounts", mode="before")
    @classmethod
    def _split_accounts(cls, value: object) -> object:
        if isinstance(value, str):
            value = tuple(dict.fromkeys(part.strip() for part in value.split(",") if part.strip()))
            bad = [a for a in value if not (len(a) == 12 and a.isascii() and a.isdigit())]
            if bad:
                raise ValueError(f"not AWS account ids (12 digits): {bad[:5]}")
        return value

    @field_validator("capacity_state_notices", mode="before")
    @classmethod
    def _split_states(cls, value: object) -> object:
        if isinstance(value, str):
            value = tuple(part.strip().lower() for part in value.split(",") if part.strip())
            unknown = sorted(set(value) - set(CAPACITY_STATES))
            if unknown:
                raise ValueError(f"unknown states {unknown}: choose from {', '.join(CAPACITY_STATES)}")
        return value

    @property
    def organization(self) -> bool:
        """A hub deployment: scheduled sweeps fan out one work item per account and region."""
        return bool(self.member_role_name)

    @property
    def dry_run(self) -> bool:
        return self.mode is Mode.NOTIFY

    @property
    def reads_by_schedule(self) -> bool:
        """Whether the GPU sweep reads by its read schedule: on, with the fixed idle policy (the adaptive one
        observes every instance at every sweep)."""
        return self.read_schedule and self.idle_policy == "fixed"


def _describe(error: ValidationError) -> str:
    problems = []
    for item in error.errors():
        field = ".".join(str(part) for part in item["loc"]) or "?"
        problems.append(f"{ENV_PREFIX}{field.upper()}: {item['msg']} (got {item.get('input')!r})")
    return "invalid costguard settings: " + "; ".join(problems)


def parse_settings(**overrides: object) -> Settings:
    """Read the settings from the environment (overrides win), raising SettingsError on bad input."""
    try:
        return Settings(**overrides)
    except ValidationError as error:
        raise SettingsError(_describe(error)) from None


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings, validated once at cold start."""
    return parse_settings()


def in_lambda() -> bool:
    """Running as a Lambda function (AWS_LAMBDA_FUNCTION_NAME is set by Lambda, and by ``sam local``)."""
    return bool(os.environ.get("AWS_LAMBDA_FUNCTION_NAME"))


def require(settings: Settings, *names: str) -> Settings:
    """At a Lambda cold start: each named setting (a table, a queue, a bucket, a secret) is set, else
    SettingsError naming its COSTGUARD_ variable, so a function missing one fails to start rather than at
    its first use of it.

    A name that is no setting is an error everywhere. Outside Lambda (a test or the IAM check importing a
    handler for its PERMISSIONS, the local stack) the values are not checked.
    """
    unknown = [name for name in names if name not in Settings.model_fields]
    if unknown:
        raise ValueError(f"not costguard settings: {unknown}")
    if not in_lambda():
        return settings
    missing = [f"{ENV_PREFIX}{name.upper()}" for name in names if not str(getattr(settings, name)).strip()]
    if missing:
        raise SettingsError(
            "invalid costguard settings: "
            + "; ".join(f"{variable}: this function needs it; none is set" for variable in missing)
        )
    return settings
