"""Benchmark case: cold import time of each function's handler module against ``import boto3`` alone.

Each measurement is a fresh interpreter (nothing imported, nothing cached in memory) that times only the
import itself, so interpreter start-up is left out of both sides alike. The bytecode cache on disk is warm
here; a deployed package that ships no .pyc files compiles on every cold start, so Lambda's own figure is
higher for both. The handlers validate their settings at import: they get the template's own environment.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

from costguard.local.template import Template, resolve

ROOT = Path(__file__).resolve().parents[1]
REPEATS = 5

# Time one import in this fresh interpreter and print milliseconds. argv[1]: a module path or "boto3".
_PROBE = """
import importlib.util, pathlib, sys, time
target = sys.argv[1]
start = time.perf_counter()
if target == "boto3":
    import boto3
else:
    sys.path.insert(0, str(pathlib.Path(target).parent))  # Lambda puts the function's own folder first
    spec = importlib.util.spec_from_file_location("handler", target)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
print((time.perf_counter() - start) * 1000)
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
        "AWS_REGION": "us-east-1",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench",
        "POWERTOOLS_TRACE_DISABLED": "true",
    }


def _import_ms(target: str, env: dict[str, str]) -> float:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, target], env=env, capture_output=True, text=True, check=True, cwd=ROOT
    )
    return float(done.stdout.strip().splitlines()[-1])


def bench_imports(repeats: int = REPEATS) -> dict[str, Any]:
    template = Template.load(ROOT / "template.yaml")
    base = {k: v for k, v in os.environ.items() if not k.startswith(("COSTGUARD_", "POWERTOOLS_"))}
    functions = sorted(template.functions().values(), key=lambda f: f.logical_id)
    targets = {"boto3": "boto3"} | {f.logical_id: str(f.module_path) for f in functions}
    samples: dict[str, list[float]] = {name: [] for name in targets}
    # Interleaved rounds, so a burst of load on the shared machine falls on every target alike.
    for _ in range(repeats):
        for name, target in targets.items():
            samples[name].append(_import_ms(target, base | handler_environment(template, name)))
    boto3_ms = statistics.median(samples.pop("boto3"))
    handlers = {
        name: {
            "median_ms": round(statistics.median(times), 1),
            "ratio_to_boto3": round(statistics.median(times) / boto3_ms, 2),
        }
        for name, times in samples.items()
    }
    return {
        "repeats": repeats,
        "boto3_median_ms": round(boto3_ms, 1),
        "handlers": handlers,
        "slowest": max(handlers, key=lambda n: handlers[n]["median_ms"]),
    }


if __name__ == "__main__":
    print(json.dumps(bench_imports(1), indent=2))
