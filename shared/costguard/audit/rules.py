"""The audit's rules as data: the packaged rules.json, overridden key by key by a user's file."""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Tags(_Strict):
    model_params: str
    workload: str
    checkpoint: str


class IdleRule(_Strict):
    gpu_max_percent: float = Field(ge=0, le=100)
    cpu_p95_percent: float = Field(ge=0, le=100)


class DownsizeRule(_Strict):
    gpu_target_percent: float = Field(gt=0, le=100)
    memory_headroom: float = Field(ge=1)
    cpu_headroom: float = Field(ge=1)


class FitRule(_Strict):
    """Compute fit and risk: no target whose projected p95 per GPU exceeds ``max_projected_percent``."""

    max_projected_percent: float = Field(gt=0, le=100)
    low_risk_percent: float = Field(gt=0, le=100)
    full_window_coverage: float = Field(
        gt=0, le=1, description="share of the window that counts as all of it"
    )


class FamilyRule(_Strict):
    memory_headroom: float = Field(ge=1)
    gpu_p95_max_percent: float = Field(ge=0, le=100)
    families: tuple[str, ...]


class ModelBand(_Strict):
    up_to_billion: float | None  # None: no upper bound
    families: tuple[str, ...]


class ModelSizeRule(_Strict):
    bytes_per_param: dict[str, float]  # what a workload holds per parameter, by costguard:workload value
    undeclared_workload: str  # how a model with no (or an unknown) workload tag is sized
    memory_headroom: float = Field(ge=1)
    bands: tuple[ModelBand, ...]
    experiment_workloads: tuple[str, ...]
    experiment_families: tuple[str, ...]
    experiment_spot_discount: float = Field(ge=0, lt=1)

    @model_validator(mode="after")
    def _sized_workloads(self) -> ModelSizeRule:
        if self.undeclared_workload not in self.bytes_per_param:
            raise ValueError(f"undeclared_workload {self.undeclared_workload!r} has no bytes_per_param entry")
        if any(b <= 0 for b in self.bytes_per_param.values()):
            raise ValueError("bytes_per_param values must be positive")
        return self


class SpotRule(_Strict):
    workloads: tuple[str, ...]
    min_running_hours: float = Field(ge=0)
    discount: float = Field(ge=0, lt=1)


class TrainiumRule(_Strict):
    workloads: tuple[str, ...]
    min_cumulative_hours: float = Field(ge=0)
    single_device_type: str
    multi_device_type: str
    caveat: str


class CommitmentRule(_Strict):
    """``commitment_candidate``: EC2 on-demand usage of a type steady over the window, priced under a plan."""

    min_share: float = Field(
        default=0.9, gt=0, le=1, description="share of the window a resource must have run"
    )
    plan: Literal["compute", "ec2_instance"] = "compute"  # the plan the headline saving is given for
    term: Literal["1yr", "3yr"] = "1yr"


class StorageRule(_Strict):
    """``orphaned_storage``: volumes and training-job prefixes left behind for longer than ``min_age_days``."""

    min_age_days: float = Field(default=30, ge=0)
    # Tags whose value names the instance type a volume served (written at launch by a launch template's tag
    # specification, or by the team): AWS keeps no record of a detached volume's former instance.
    volume_type_tags: tuple[str, ...] = ("costguard:instance-type",)


class Rules(_Strict):
    version: int
    hours_per_month: float = Field(gt=0)
    min_coverage: float = Field(ge=0, le=1, description="share of the window that must have GPU data")
    tags: Tags
    idle: IdleRule
    downsize: DownsizeRule
    fit: FitRule
    family: FamilyRule
    model_size: ModelSizeRule
    spot: SpotRule
    trainium: TrainiumRule
    commitment: CommitmentRule = Field(default_factory=CommitmentRule)
    storage: StorageRule = Field(default_factory=StorageRule)


class RulesFileError(ValueError):
    """The rules file cannot be read or does not validate; the message names the file."""


def _merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


@cache
def packaged_rules_text() -> str:
    return resources.files(__package__).joinpath("rules.json").read_text(encoding="utf-8")


def parse_rules(override: dict[str, Any] | None = None, *, source: str = "rules override") -> Rules:
    """The packaged rules with ``override`` merged in: a user file names only what it changes."""
    base: dict[str, Any] = json.loads(packaged_rules_text())
    try:
        return Rules.model_validate(_merge(base, override or {}))
    except ValidationError as error:
        raise RulesFileError(f"{source}: {error}") from None


def read_override(text: str, source: str) -> dict[str, Any]:
    try:
        loaded = json.loads(text)
    except json.JSONDecodeError as error:
        raise RulesFileError(f"{source}: not JSON: {error}") from None
    if not isinstance(loaded, dict):
        raise RulesFileError(f"{source}: the rules file holds one JSON object")
    return loaded


def load_rules(path: str | Path | None = None) -> Rules:
    """The packaged rules, or those overridden by a local JSON file."""
    if not path:
        return parse_rules()
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as error:
        raise RulesFileError(f"{path}: {error}") from None
    return parse_rules(read_override(text, str(path)), source=str(path))
