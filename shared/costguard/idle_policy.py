"""The adaptive idle policy in a sweep, for any resource it judges (EC2 GPU instances, SageMaker notebooks).

Each resource's history observes the sweep period just ended, the idle periods it records feed its peer groups'
pools, and its idle finding is advised with its own history and its peers' prior (detect/adaptive.py,
detect/idle_priors.py: the same code the backtest runs). The state costs one batched read and at most one batched
write per call (aws/idle_history.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from costguard.aws.idle_history import IdleHistories, history_key, prior_key
from costguard.detect import adaptive, idle_priors
from costguard.model import Finding
from costguard.settings import Settings

# The sweep's period: what each sweep observes (the GPU sweep's SWEEP_STEP, the SageMaker sweep's schedule).
STEP = timedelta(minutes=5)


def params_of(settings: Settings) -> adaptive.AdaptiveParams:
    """The policy's knobs from the settings (COSTGUARD_IDLE_WINDOW_MINUTES, COSTGUARD_ADAPTIVE_*, ...)."""
    return adaptive.AdaptiveParams(
        idle_window=timedelta(minutes=settings.idle_window_minutes),
        grace=timedelta(minutes=settings.grace_minutes),
        floor=timedelta(minutes=settings.adaptive_floor_minutes),
        horizon=timedelta(minutes=settings.adaptive_horizon_minutes),
        interruption_cost_usd=settings.interruption_cost_usd,
    )


@dataclass(frozen=True)
class Observed:
    """One resource as a sweep saw it in the period just ended."""

    resource_id: str
    account: str
    region: str
    kind: str  # idle_priors.KINDS
    instance_type: str
    tags: Mapping[str, str]
    status: adaptive.Status
    cpu: float | None = None
    launch_time: datetime | None = None  # EC2 sets it at each start: None when not known


def adapted(
    observed: Sequence[Observed],
    findings: list[Finding],
    store: IdleHistories,
    params: adaptive.AdaptiveParams,
    now: datetime,
    step: timedelta,
) -> list[Finding]:
    """Learn from this sweep's observations, then advise each idle finding of these resources."""
    if not observed:
        return findings
    keys = {o.resource_id: history_key(o.account, o.region, o.resource_id) for o in observed}
    groups = {o.resource_id: idle_priors.peer_groups(o.kind, o.instance_type, o.tags) for o in observed}
    group_keys = {g: prior_key(o.account, o.region, g) for o in observed for g in groups[o.resource_id]}
    known, stored_pools = store.read_state(keys.values(), set(group_keys.values()))
    pools = {g: stored_pools.get(k) or idle_priors.Pool() for g, k in group_keys.items()}
    changed: dict[str, adaptive.IdleHistory] = {}
    histories: dict[str, adaptive.IdleHistory] = {}
    recorded: dict[str, list[adaptive.Cell]] = {}
    for o in observed:
        history = known.get(keys[o.resource_id]) or adaptive.IdleHistory()
        history.zone = adaptive.zone_of(o.tags)
        seen = history.last_seen
        # Running since before it was last seen: no stop in between, however long ago the history was last
        # written (it is written only when it changes).
        if seen is not None and o.launch_time is not None and o.launch_time < seen:
            history.last_seen = max(seen, now - step)
        if history.observe(now, o.status, o.cpu, params) or keys[o.resource_id] not in known:
            changed[keys[o.resource_id]] = history
        recorded[o.resource_id] = history.take_recorded()
        histories[o.resource_id] = history
    grown = idle_priors.pooled(recorded, groups, pools)
    store.write_state(changed, {group_keys[g]: pools[g] for g in grown}, now)
    out = []
    for finding in findings:
        learned = histories.get(finding.resource.id)
        if finding.reason in adaptive.ADAPTED and learned is not None:
            prior = idle_priors.prior_for(groups[finding.resource.id], pools)
            advice = adaptive.advise(learned, now, finding.hourly_usd, params, prior)
            finding = adaptive.adapt(finding, advice, now, params)
        out.append(finding)
    return out
