"""Benchmark case: the right-sizing rules over 10,000 instances (CPU time of the pure evaluation)."""

from __future__ import annotations

import time
from typing import Any

from costguard.audit.discover import facts_of
from costguard.audit.evaluate import Catalog, evaluate
from costguard.audit.model import Subject, TypeOption, Usage
from costguard.audit.rules import parse_rules
from costguard.model import ResourceKind
from costguard.pricing import bundled_table

# (type, per-GPU p95s, GPU memory peak GiB, CPU p95, tags): idle, downsize, family, busy, model size, spot, trainium
SHAPES: list[tuple[str, tuple[float, ...], float, float, dict[str, str]]] = [
    ("g6e.12xlarge", (2, 1, 1, 1), 0.5, 3, {}),
    ("g5.12xlarge", (70, 2, 2, 2), 10, 10, {}),
    ("p5.48xlarge", (35,) * 8, 14, 15, {}),
    ("g6.xlarge", (90,), 18, 60, {}),
    ("p4d.24xlarge", (90,) * 8, 12, 40, {"costguard:model-params": "7B"}),
    ("g5.48xlarge", (95,) * 8, 20, 50, {"costguard:workload": "training", "costguard:checkpoint": "s3://c/"}),
    ("p4d.24xlarge", (95,) * 8, 35, 45, {"costguard:workload": "transformer-training"}),
]


def bench_audit_evaluation(instances: int = 10_000) -> dict[str, Any]:
    from moto.ec2.models.instance_types import INSTANCE_TYPES  # DescribeInstanceTypes' data, offline

    table = bundled_table()["ec2"]
    facts = {t: facts_of(INSTANCE_TYPES[t]) for t in table if t in INSTANCE_TYPES}
    catalog = Catalog(
        [TypeOption(facts=f, instance_type=t, hourly_usd=table[t]) for t, f in facts.items()],
        dict(table),
    )
    subjects, usage = [], {}
    for n in range(instances):
        instance_type, p95s, memory, cpu, tags = SHAPES[n % len(SHAPES)]
        subject = Subject(
            kind=ResourceKind.EC2_INSTANCE,
            id=f"i-{n:017x}",
            account="123456789012",
            region="us-east-1",
            instance_type=instance_type,
            running_hours=300,
            tags=tags,
            facts=facts[instance_type],
        )
        subjects.append(subject)
        usage[subject.key] = Usage(
            window_hours=336,
            period_hours=2,
            hours_observed=336,
            gpu_p50=max(p95s) - 5,
            gpu_p95=max(p95s),
            gpu_max=max(p95s) + 2,
            per_gpu_p95=p95s,
            memory_peak_mib=memory * 1024,
            # The busy GPUs hold the peak each, the idle ones half a GiB.
            memory_total_peak_mib=sum(memory * 1024 if p > 10 else 512 for p in p95s),
            cpu_p95=cpu,
        )
    rules = parse_rules()
    start = time.process_time()
    findings, skipped = evaluate(subjects, usage, catalog, rules)
    seconds = time.process_time() - start
    by_rule: dict[str, int] = {}
    for finding in findings:
        by_rule[finding.reason.value] = by_rule.get(finding.reason.value, 0) + 1
    return {
        "instances": instances,
        "candidate_types": len(catalog.by_type),
        "cpu_seconds": round(seconds, 3),
        "findings": len(findings),
        "skipped": len(skipped),
        "findings_by_rule": dict(sorted(by_rule.items())),
    }


def audit_line(a: dict[str, Any] | None) -> str:
    if not a:
        return ""
    return (
        f"- Right-sizing rules over {a['instances']:,} instances ({a['candidate_types']} candidate types): "
        f"{a['cpu_seconds']} s CPU ({a['findings']:,} findings).\n"
    )
