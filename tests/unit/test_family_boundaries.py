"""A job family is not a weapon: a family guessed from names never stops anything, a declared one stops only
its own idle jobs. Pure: families, GPU use and the decisions the policy takes on them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from costguard.detect.job_families import (
    Failure,
    FailureLoop,
    Family,
    failure_loop,
    family_of,
    job_family,
)
from costguard.detect.training_guardrails import (
    GpuUse,
    gpu_use,
    host_count,
    loop_finding,
    loop_stop_findings,
    name_family_note,
)
from costguard.events.sagemaker import TrainingJobDetail, TrainingJobStateChange
from costguard.model import Action
from costguard.policy import Policy, decide
from tests.conftest import load_event

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
WINDOW = timedelta(hours=6)
IDLE_WINDOW = timedelta(minutes=30)
TAG = "costguard:family"


def running(name: str, tags: dict[str, str], count: int = 1) -> TrainingJobDetail:
    return TrainingJobDetail.model_validate(
        {
            "TrainingJobName": name,
            "TrainingJobArn": f"arn:aws:sagemaker:us-east-1:123456789012:training-job/{name}",
            "TrainingJobStatus": "InProgress",
            "ResourceConfig": {"InstanceType": "ml.g5.xlarge", "InstanceCount": count},
            "TrainingStartTime": (NOW - timedelta(hours=2)).isoformat(),
            "Tags": tags,
        }
    )


def loop_of(family: Family) -> FailureLoop:
    failures = [Failure(f"{family.name}-{i}", NOW - timedelta(hours=i), "OOM", 1.0) for i in (1, 2, 3)]
    loop = failure_loop(family, failures, NOW, threshold=3, window=WINDOW)
    assert loop is not None
    return loop


def series(*values: float) -> list[tuple[datetime, float]]:
    return [(NOW - timedelta(minutes=len(values) - n), v) for n, v in enumerate(values)]


def test_the_reproduction_name_stripping_merges_model_sizes() -> None:
    # The stripping is kept as it is: a counter suffix and a model size look alike. That is why a family
    # guessed from names must never be acted on.
    assert {family_of(n) for n in ("resnet-18", "resnet-34", "resnet-50", "resnet-152")} == {"resnet"}
    guessed = job_family("resnet-152")
    assert guessed == Family("resnet", "name")
    assert not guessed.declared


def test_declared_and_guessed_families_never_share_a_key() -> None:
    tagged = job_family("resnet-152", {TAG: "resnet"})
    piped = job_family("resnet-152", {"sagemaker:pipeline-name": "resnet"})
    guessed = job_family("resnet-18")
    assert tagged.declared and piped.declared
    assert len({tagged.key, piped.key, guessed.key}) == 3
    assert guessed.key == "resnet"  # unchanged for names: state keys and alert ids stay as they were
    assert piped.key == "pipeline:resnet" == family_of("x-1", {"sagemaker:pipeline-name": "resnet"})
    # The tag wins over the pipeline; a tagged job of another value is another family.
    assert job_family("a", {TAG: "x", "sagemaker:pipeline-name": "p"}) == Family("x", "tag")
    assert job_family("a", {TAG: "y"}) != tagged


def test_a_guessed_family_gives_no_stop_finding_even_for_idle_jobs() -> None:
    loop = loop_of(Family("resnet", "name"))
    jobs = [running("resnet-152", {"team": "perception"})]
    found = loop_stop_findings(
        loop,
        jobs,
        account="123456789012",
        region="us-east-1",
        price_of={},
        gpu_of={"resnet-152": GpuUse("idle", 0.5, 1, (), 1)},
        idle_threshold=5.0,
        idle_window=IDLE_WINDOW,
        observed_at=NOW,
    )
    assert found == []


def test_the_loop_alert_of_a_guessed_family_says_why_nothing_is_stopped() -> None:
    loop = loop_of(Family("resnet", "name"))
    latest = TrainingJobStateChange.model_validate(load_event("sagemaker-training-job-failed-resnet.json"))
    finding = loop_finding(
        loop,
        latest.detail,
        account="123456789012",
        region="us-east-1",
        window=WINDOW,
        observed_at=NOW,
        remediation=name_family_note(Family("resnet", "name"), acting=True),
    )
    assert not finding.remediable
    assert finding.resource.id == "resnet"
    assert "Nothing is stopped" in finding.summary
    assert "guessed from job names" in finding.summary
    assert TAG in finding.summary
    assert finding.evidence["family_from"] == "name"


def test_a_tagged_family_stops_only_jobs_known_idle() -> None:
    loop = loop_of(Family("detr-sweep", "tag"))
    jobs = [running(n, {TAG: "detr-sweep"}) for n in ("idle", "busy", "dark")]
    gpu = {
        "idle": gpu_use({1: series(0.0, 1.5, 2.0)}, 1, 5.0),
        "busy": gpu_use({1: series(0.0, 0.0, 91.0)}, 1, 5.0),
        "dark": gpu_use({}, 1, 5.0),
    }
    found = loop_stop_findings(
        loop,
        jobs,
        account="123456789012",
        region="us-east-1",
        price_of={},
        gpu_of=gpu,
        idle_threshold=5.0,
        idle_window=IDLE_WINDOW,
        observed_at=NOW,
    )
    acting = Policy(dry_run=False, grace=timedelta(minutes=15))
    decided = {f.resource.id: decide(f, acting, NOW) for f in found}
    assert decided["idle"].action is Action.MARK
    assert decided["busy"].action is Action.NOTIFY
    assert "busy on its GPUs" in decided["busy"].note and "91%" in decided["busy"].note
    assert decided["dark"].action is Action.NOTIFY
    assert "GPU use is unknown" in decided["dark"].note and "not known to be idle" in decided["dark"].note
    # The message says so too.
    dark = next(f for f in found if f.resource.id == "dark")
    assert "GPU use is unknown" in dark.summary
    # Marked long enough ago, the idle job is stopped; the busy one never is.
    marked = {"costguard:marked-at": (NOW - timedelta(minutes=20)).isoformat()}
    later = [f.model_copy(update={"resource": f.resource.model_copy(update={"tags": marked})}) for f in found]
    actions = {f.resource.id: decide(f, acting, NOW).action for f in later}
    assert actions == {"idle": Action.STOP, "busy": Action.NOTIFY, "dark": Action.NOTIFY}


@pytest.mark.parametrize(
    ("hosts", "count", "state"),
    [
        ({1: series(1.0, 2.0), 2: series(0.0, 5.0)}, 2, "idle"),  # at the threshold is still idle
        ({1: series(1.0, 2.0), 2: series(0.0, 5.1)}, 2, "busy"),
        ({1: series(1.0, 2.0)}, 2, "unknown"),  # algo-2 silent: it might be the one working
        ({1: series(99.0)}, 2, "busy"),  # busy wins over a silent host
        ({}, 1, "unknown"),  # no data at all
        ({}, 0, "unknown"),  # no hosts known
        ({1: series(1.0), 3: series(0.0)}, 2, "unknown"),  # a series outside algo-1..N does not count
    ],
)
def test_gpu_use(hosts: dict[int, list[tuple[datetime, float]]], count: int, state: str) -> None:
    assert gpu_use(hosts, count, 5.0).state == state


def test_unknown_gpu_use_names_the_silent_hosts() -> None:
    use = gpu_use({1: series(1.0)}, 3, 5.0)
    blocker = use.blocker(5.0, IDLE_WINDOW)
    assert blocker is not None and "algo-2, algo-3" in blocker and "30 min" in blocker
    assert gpu_use({1: series(1.0)}, 1, 5.0).blocker(5.0, IDLE_WINDOW) is None


def test_host_count_covers_heterogeneous_clusters() -> None:
    assert host_count(running("a", {}, count=4)) == 4
    hetero = TrainingJobDetail.model_validate(
        {
            "TrainingJobName": "h",
            "TrainingJobStatus": "InProgress",
            "ResourceConfig": {
                "InstanceCount": 0,
                "InstanceGroups": [
                    {"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 2, "InstanceGroupName": "a"},
                    {"InstanceType": "ml.c5.xlarge", "InstanceCount": 1, "InstanceGroupName": "b"},
                ],
            },
        }
    )
    assert host_count(hetero) == 3
    assert (
        host_count(
            TrainingJobDetail.model_validate({"TrainingJobName": "n", "TrainingJobStatus": "InProgress"})
        )
        == 0
    )
