"""Benchmark case: cold import time of each function's handler module against ``import boto3`` alone and
against Cloud Custodian's ``import c7n.handler``.

Each measurement is a fresh interpreter (nothing imported, nothing cached in memory) that times only the
import itself, so interpreter start-up is left out of every side alike. The bytecode cache on disk is warm
here; a deployed package that ships no .pyc files compiles on every cold start, so Lambda's own figure is
higher for all. The handlers validate their settings at import: they get the template's own environment.

A handler defers boto3 and botocore to the first client it builds (costguard.aws.clients): its cold import is
therefore also measured with that first client built, so a deferral is not read as a saving. c7n lives in its
own environment (bench/.venv-c7n, made here from bench/requirements-c7n.txt if missing, on this interpreter's
Python), and each handler's sample is taken next to one of c7n's, so load on the shared machine falls on both.

Load on the machine moves both sides' times far more than it moves their ratio, and moves it from one round to
the next: a handler's ratio to c7n is therefore the median, over its samples, of each sample against the c7n
sample taken beside it (never against the whole run's c7n median), and the run states the spread: each handler's
ratios sample by sample (min, median, max), c7n's own times, the range of the handlers' ratios, and which handlers
are not under c7n. Each sample's CPU time is kept too (the import's own work, which the machine's load moves far
less than its wall time), and compared the same way.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from costguard.local.template import Template, resolve

ROOT = Path(__file__).resolve().parents[1]
REPEATS = 9
C7N_VENV = ROOT / "bench" / ".venv-c7n"
C7N_REQUIREMENTS = ROOT / "bench" / "requirements-c7n.txt"

# Time one import in this fresh interpreter and print milliseconds: the import, the import and the first client,
# the import's CPU time. argv[1]: a handler's path or a module name; argv[2] "client": then also build the first
# client as a handler does (boto3 and botocore load there).
_PROBE = """
import importlib, importlib.util, pathlib, sys, time
target = sys.argv[1]
start, cpu = time.perf_counter(), time.process_time()
if not target.endswith(".py"):
    importlib.import_module(target)
else:
    sys.path.insert(0, str(pathlib.Path(target).parent))  # Lambda puts the function's own folder first
    spec = importlib.util.spec_from_file_location("handler", target)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
imported, cpu = (time.perf_counter() - start) * 1000, (time.process_time() - cpu) * 1000
if sys.argv[2:] == ["client"]:
    from costguard.aws import clients

    clients.sqs()  # the first call any handler makes (a rejected event's, at the latest)
print(imported, (time.perf_counter() - start) * 1000, cpu)
"""


class _StandIns(dict[str, str]):
    """Any other resource the stack would create: a stand-in name (the handlers only read it at import)."""

    def __missing__(self, name: str) -> str:
        return f"costguard-{name}"


def handler_environment(template: Template, logical_id: str) -> dict[str, str]:
    """The environment a deployed function starts with: the template's globals and its own variables with
    the parameter defaults, and stand-ins for the resources the stack would create."""
    refs = (
        template.parameter_defaults()
        | {
            "StateTable": "costguard-state",
            "DecisionsQueue": "https://sqs.us-east-1.amazonaws.com/123456789012/costguard-decisions",
            "FailedEventsQueue": "https://sqs.us-east-1.amazonaws.com/123456789012/costguard-failed-events",
            "SlackWebhookSecret": "arn:aws:secretsmanager:us-east-1:123456789012:secret:costguard-slack",
            "SlackWebhookSecretArn": "",
            "AuditReportsBucket": "costguard-audit-reports",
            "OpsNotificationsTopic": "arn:aws:sns:us-east-1:123456789012:costguard-ops",
        }
        | {
            queue: f"https://sqs.us-east-1.amazonaws.com/123456789012/costguard-{queue}"
            for queue in (
                "GpuIdleSweepQueue",
                "SageMakerIdleSweepQueue",
                "CapacitySweepQueue",
                "TrainingCeilingsSweepQueue",
            )
        }
    )
    refs = _StandIns(refs)
    props = template.resources.get(logical_id, {}).get("Properties", {})
    own = (props.get("Environment") or {}).get("Variables") or {}
    env = {
        k: str(resolve(v, refs, {"CreateSlackSecret": True}))
        for k, v in (template.global_environment() | own).items()
    }
    return env | {
        # Set by Lambda in every function (the handler validates its settings, and pauses the collector for its
        # imports, as deployed).
        "AWS_LAMBDA_FUNCTION_NAME": f"costguard-{logical_id or 'bench'}",
        "AWS_REGION": "us-east-1",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench",
        "POWERTOOLS_TRACE_DISABLED": "true",
    }


def _import_ms(target: str, env: dict[str, str], python: str = sys.executable) -> tuple[float, float, float]:
    """(the import alone, the import and the first client, the import's CPU time) in ms, from one fresh
    interpreter."""
    argv = [python, "-c", _PROBE, target] + (["client"] if target.endswith(".py") else [])
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=True, cwd=ROOT)
    imported, total, cpu = done.stdout.strip().splitlines()[-1].split()
    return float(imported), float(total), float(cpu)


def c7n_python() -> Path:
    """bench/.venv-c7n's interpreter, the environment made (c7n installed) if it is missing or out of date."""
    python = C7N_VENV / "bin" / "python"
    ready = C7N_VENV / ".ready"
    wanted = C7N_REQUIREMENTS.read_text()
    if not (ready.is_file() and ready.read_text() == wanted and python.exists()):
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(C7N_VENV)], check=True)
        pip = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
        subprocess.run([*pip, "-r", str(C7N_REQUIREMENTS)], check=True)
        ready.write_text(wanted)
    return python


def c7n_version(python: Path) -> str:
    show = "import importlib.metadata as m; print(m.version('c7n'))"
    return subprocess.run(
        [str(python), "-c", show], capture_output=True, text=True, check=True
    ).stdout.strip()


def spread(values: list[float], digits: int = 2) -> dict[str, float]:
    """The smallest, the median and the largest of ``values``, rounded."""
    return {
        "min": round(min(values), digits),
        "median": round(statistics.median(values), digits),
        "max": round(max(values), digits),
    }


@dataclass(frozen=True)
class _Sample:
    """One handler's sample and the c7n sample taken beside it (ms)."""

    ms: float
    with_client_ms: float
    cpu_ms: float
    c7n_ms: float
    c7n_cpu_ms: float

    @classmethod
    def of(cls, handler: tuple[float, float, float], c7n: tuple[float, float, float]) -> _Sample:
        return cls(*handler, c7n[0], c7n[2])


def bench_imports(repeats: int = REPEATS) -> dict[str, Any]:
    template = Template.load(ROOT / "template.yaml")
    base = {k: v for k, v in os.environ.items() if not k.startswith(("COSTGUARD_", "POWERTOOLS_"))}
    functions = sorted(template.functions().values(), key=lambda f: f.logical_id)
    targets = {f.logical_id: str(f.module_path) for f in functions}
    c7n = str(c7n_python())
    plain = base | handler_environment(template, "") | {"PYTHONPATH": ""}
    boto3_ms: list[float] = []
    samples: dict[str, list[_Sample]] = {name: [] for name in targets}
    # Interleaved rounds, each handler's sample beside one of c7n's: a burst of load on the shared machine falls
    # on both sides alike. Which side goes first alternates from round to round.
    for round_ in range(repeats):
        boto3_ms.append(_import_ms("boto3", plain)[0])
        for name, target in targets.items():
            env = base | handler_environment(template, name)
            if round_ % 2:
                beside = _import_ms("c7n.handler", plain, c7n)
                samples[name].append(_Sample.of(_import_ms(target, env), beside))
            else:
                own = _import_ms(target, env)
                samples[name].append(_Sample.of(own, _import_ms("c7n.handler", plain, c7n)))
    c7n_ms = [s.c7n_ms for runs in samples.values() for s in runs]
    c7n_cpu = [s.c7n_cpu_ms for runs in samples.values() for s in runs]
    boto3_median, c7n_median = statistics.median(boto3_ms), statistics.median(c7n_ms)
    handlers = {}
    for name, runs in samples.items():
        imported = statistics.median(s.ms for s in runs)
        pairs = spread([s.ms / s.c7n_ms for s in runs])
        cpu = statistics.median(s.cpu_ms for s in runs)
        handlers[name] = {
            "median_ms": round(imported, 1),
            "with_first_client_ms": round(statistics.median(s.with_client_ms for s in runs), 1),
            "ratio_to_boto3": round(imported / boto3_median, 2),
            # Each sample against the c7n sample taken beside it (the run's other rounds met other loads): the
            # median of those ratios, and their spread.
            "ratio_to_c7n": pairs["median"],
            "ratio_to_c7n_pairs": pairs,
            "cpu_ms": round(cpu, 1),
            "cpu_ratio_to_c7n": round(statistics.median(s.cpu_ms / s.c7n_cpu_ms for s in runs), 2),
        }
    slowest = max(handlers, key=lambda n: handlers[n]["median_ms"])
    lowest = min(handlers, key=lambda n: handlers[n]["ratio_to_c7n"])
    highest = max(handlers, key=lambda n: handlers[n]["ratio_to_c7n"])
    cpu_ratios = [h["cpu_ratio_to_c7n"] for h in handlers.values()]
    return {
        "repeats": repeats,
        "boto3_median_ms": round(boto3_median, 1),
        "c7n": {
            "version": c7n_version(Path(c7n)),
            "median_ms": round(c7n_median, 1),
            "samples": len(c7n_ms),
            "ms_spread": spread(c7n_ms, 1),
            "cpu_median_ms": round(statistics.median(c7n_cpu), 1),
            # The handlers' ratios, the lowest to the highest.
            "ratio_range": {
                "min": handlers[lowest]["ratio_to_c7n"],
                "lowest": lowest,
                "max": handlers[highest]["ratio_to_c7n"],
                "highest": highest,
            },
            "cpu_ratio_range": {"min": min(cpu_ratios), "max": max(cpu_ratios)},
            "slowest_ratio": handlers[slowest]["ratio_to_c7n"],
            "slowest_pair_ratios": handlers[slowest]["ratio_to_c7n_pairs"],
            "slowest_at_most_c7n": handlers[slowest]["ratio_to_c7n"] <= 1,
            "not_under_c7n": sorted(n for n, h in handlers.items() if h["ratio_to_c7n"] >= 1),
        },
        "handlers": handlers,
        "slowest": slowest,
    }


if __name__ == "__main__":
    print(json.dumps(bench_imports(1), indent=2))
