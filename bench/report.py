"""The benchmark figures as text: RESULTS.md sections, docs/benchmark.md's figures and the README's cost block,
from results.json.

docs/benchmark.md's figures and the README's "What it costs to run" figures live between markers and are
rewritten by every ``make bench``; a unit test renders both blocks again from bench/results.json and compares, so
neither can quote a figure the results lack.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
BENCHMARK = ROOT / "docs" / "benchmark.md"
BEGIN = "<!-- bench:begin (written by bench/run.py from bench/results.json: do not edit by hand) -->"
END = "<!-- bench:end -->"
COST_BEGIN = (
    "<!-- bench-cost:begin (written by bench/run.py from bench/results.json: do not edit by hand) -->"
)
COST_END = "<!-- bench-cost:end -->"
SIZES = ("1000", "10000")


def _calls(calls: dict[str, int]) -> str:
    return ", ".join(f"{n:,} `{op.split(':', 1)[1]}`" for op, n in calls.items())


def readme_block(r: dict[str, Any]) -> str:
    """docs/benchmark.md's figures, every one read from ``r`` (bench/results.json)."""
    lines = [
        f"Last run {r['measured_at'][:10]}, Python {r['machine']['python']} ({r['machine']['processor']}), "
        "on a shared 2-core development machine.",
        "",
    ]
    imports = r.get("cold_imports")
    if imports:
        handlers = imports["handlers"]
        fastest = min(handlers, key=lambda n: handlers[n]["median_ms"])
        slowest = imports["slowest"]
        lines.append(
            f"- Cold import of a handler module (fresh interpreter, median of {imports['repeats']}): "
            f"{handlers[fastest]['median_ms']:,} ms ({fastest}) to {handlers[slowest]['median_ms']:,} ms "
            f"({slowest}), against {imports['boto3_median_ms']:,} ms for `import boto3` alone in the same run: "
            f"{handlers[fastest]['ratio_to_boto3']} to {handlers[slowest]['ratio_to_boto3']} times boto3."
            + _against_c7n(imports)
        )
    detectors = r.get("detector_latency")
    if detectors:
        slowest_by = detectors["slowest_event_median_us_by_detector"]
        worst = max(slowest_by, key=lambda d: slowest_by[d])
        lines.append(
            f"- Detectors on the shipped events (median of {detectors['repeats']:,} calls): at most "
            f"{slowest_by[worst]:g} µs an event, the slowest being {worst}."
        )
    fleet = r.get("fleet")
    if fleet:
        for size in SIZES:
            s, c, a = fleet[f"sweep_{size}"], fleet[f"reconcile_{size}"], fleet[f"audit_{size}"]
            lines.append(
                f"- {int(size):,} GPU instances of the mixed fleet (1, 4 and 8 GPUs in equal thirds: "
                f"{s['gpu_series']:,} GPUs): a sweep makes {s['api_calls_total']} "
                f"calls ({_calls(s['api_calls'])}), peak {s['peak_rss_mib']:,} MiB; an hourly reconcile (GpuAlarms on) "
                f"{c['api_calls_total']} ({_calls(c['api_calls'])}), peak {c['peak_rss_mib']:,} MiB; an audit "
                f"{a['api_calls_total']}, {a['metrics_requested']:,} metrics read, peak {a['peak_rss_mib']:,} MiB."
            )
    costs = r.get("monthly_cost")
    if costs:
        lines += cost_lines(costs)
    v = r.get("verdicts_10k_instances")
    if v:
        lines.append(
            f"- GPU verdicts for {v['instances']:,} instances x {v['gpus_per_instance']} GPUs "
            f"({v['datapoints']:,} one-minute datapoints): {v['cpu_seconds']} s of CPU."
        )
    d = r.get("demo_replay")
    if d:
        lines.append(
            f"- The demo replay ({d['events']} events, {d['slack_messages']} Slack messages in the channel, "
            f"{d.get('thread_replies', 0)} replies in threads): "
            f"{d['wall_seconds']} s on moto."
        )
    a = r.get("audit_evaluation_10k_instances")
    if a:
        lines.append(
            f"- The right-sizing rules over {a['instances']:,} instances ({a['candidate_types']} candidate types): "
            f"{a['cpu_seconds']} s of CPU."
        )
    b = r.get("backtest_1000_instances_7_days")
    if b:
        lines.append(
            f"- A backtest of {b['instances']:,} GPU instances ({b['gpus']:,} GPUs) over {b['days']} days in "
            f"5-minute steps: {b['get_metric_data_calls']} `GetMetricData` calls (floor "
            f"{b['get_metric_data_floor']}) answered in-process, {b.get('cpu_seconds')} s of CPU "
            f"({b['total_seconds']} s wall)."
        )
    t = r.get("hostile_input_and_soak")
    if t:
        p, soak = t["property"], t["soak"]
        lines.append(
            f"- Hostile input: {p['total_examples']:,} mutated events ({p['examples_per_handler']} per handler, "
            f"{len(p['handlers'])} handlers, fixed seed) with no unhandled exception; every rejection logged, "
            f"counted and kept."
        )
        lines.append(
            f"- Notifier soak: {soak['delivered_exactly_once']:,} of {soak['notices']:,} notices delivered exactly "
            f"once with {soak['failing_share']:.0%} of Slack calls failing ({soak['slack_requests']:,} requests, "
            f"{soak['redriven']} redriven from the dead-letter queue)."
        )
    return "\n".join(lines)


def _reads(schedule: dict[str, Any]) -> str:
    return (
        f"{schedule['reads_per_instance_hour']:g} reads an instance-hour of "
        f"{schedule['gpu_metrics_per_instance']:g} GPU metrics, {schedule['evidence_metrics_per_instance_hour']:g} "
        f"evidence metrics an instance-hour ({schedule['source']})"
    )


def readme_cost_block(r: dict[str, Any]) -> str:
    """The README's "What it costs to run" figures: the monthly bill of each fleet size, and how soon a stop
    reaches Slack, from ``r``."""
    lines = cost_lines(r["monthly_cost"])
    latency = latency_sentence(r.get("slack_latency"))
    if latency:
        lines[-1] += " " + latency
    return "\n".join(lines)


LATENCY_CASES = {
    "organization_burst": "an organization's burst",
    "slow_slack": "Slack answering late for five minutes",
    "throttled_state_writes": "a fifth of state writes throttled",
}


def latency_sentence(latency: dict[str, Any] | None) -> str:
    """How soon a stop reaches Slack after its decision, each case of tests/integration/test_slack_latency.py."""
    if not latency:
        return ""
    cases = "; ".join(
        f"{words}, {latency[case]['stop_seconds_p95']} s"
        for case, words in LATENCY_CASES.items()
        if case in latency
    )
    return (
        "A stop reaches Slack this soon after its decision (95th percentile, time played as docs/slack.md "
        f"says): {cases}."
    )


def cost_lines(costs: dict[str, Any]) -> list[str]:
    """The monthly bill (docs/benchmark.md and the README): each fleet size with the alarms off (the default) and on."""
    lines = []
    for size, month in costs["fleets"].items():
        top = sorted(month["lines"], key=lambda line: -line["usd"])[:2]
        on = costs["fleets_gpu_alarms_on"][size]["total_usd"]
        lines.append(
            f"- Running costguard for {int(size):,} GPU instances of the mixed fleet ({month['gpus']:,} GPUs) with "
            f"findings: ${month['total_usd']:,.2f} a month with the per-instance alarms off (the default), mostly "
            f"{top[0]['item']} (${top[0]['usd']:,.2f}) and {top[1]['item']} (${top[1]['usd']:,.2f}); "
            f"${on:,.2f} with `GpuAlarms=on`."
        )
    bare = costs["without_read_schedule"]
    compared = ""
    if costs["read_schedule"]["reads_per_instance_hour"] != bare["read_schedule"]["reads_per_instance_hour"]:
        compared = (
            f" Reading every instance at every sweep instead, 1,000 instances would cost "
            f"${bare['total_usd']['1000']:,.2f} a month (${bare['total_usd_gpu_alarms_on']['1000']:,.2f} with the "
            "alarms on)."
        )
    lines.append(
        f"- The bills above: us-east-1 prices of {costs['prices_as_of']}; the sweep's reads: "
        f"{_reads(costs['read_schedule'])}.{compared}"
    )
    return lines


def _against_c7n(imports: dict[str, Any]) -> str:
    """The handlers against Cloud Custodian's ``import c7n.handler``, sampled alternately in the same run: c7n's
    own spread, the range of the handlers' ratios (each the median of its samples' ratios to the c7n samples taken
    beside them), those not under it, the highest's ratios sample by sample, and the range in CPU time. A run
    recorded before the spread was kept states what its medians give."""
    c7n = imports.get("c7n")
    if not c7n:
        return ""
    handlers = imports["handlers"]
    ratios = c7n.get("ratio_range") or {}
    lowest = ratios.get("lowest") or min(handlers, key=lambda n: handlers[n]["ratio_to_c7n"])
    highest = ratios.get("highest") or max(handlers, key=lambda n: handlers[n]["ratio_to_c7n"])
    own = c7n.get("ms_spread")
    spread = f" (median of {c7n['samples']}: {own['min']:,} to {own['max']:,} ms)" if own else ""
    above = c7n.get("not_under_c7n")
    if above is None:
        above = sorted(n for n, h in handlers.items() if h["median_ms"] >= c7n["median_ms"])
    pairs = handlers[highest].get("ratio_to_c7n_pairs")
    per_sample = (
        f"; the highest {pairs['min']} to {pairs['max']} times sample by sample, each sample against the c7n "
        "sample taken beside it"
        if pairs
        else ""
    )
    cpu = c7n.get("cpu_ratio_range")
    in_cpu = (
        f"; in CPU time, which the machine's load moves far less, {cpu['min']} to {cpu['max']} times"
        f" ({c7n['cpu_median_ms']:,} ms for c7n)"
        if cpu
        else ""
    )
    slowest = imports["slowest"]
    return (
        f" `import c7n.handler` (c7n {c7n['version']}, its own environment, sampled beside each handler's): "
        f"{c7n['median_ms']:,} ms{spread}; the handlers {handlers[lowest]['ratio_to_c7n']} ({lowest}) to "
        f"{handlers[highest]['ratio_to_c7n']} ({highest}) times that, "
        f"{_not_under(above, len(handlers))}{per_sample}{in_cpu}. The slowest ({slowest}): "
        f"{handlers[slowest]['with_first_client_ms']:,} ms with its first client built."
    )


def _not_under(names: list[str], of: int) -> str:
    if not names:
        return "every one under it"
    return f"{len(names)} of {of} not under it ({', '.join(names)})"


def replace_block(text: str, block: str, begin: str = BEGIN, end: str = END) -> str:
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.DOTALL)
    if not pattern.search(text):
        raise ValueError(f"no {begin!r} ... {end!r} block")
    return pattern.sub(lambda _: f"{begin}\n{block}\n{end}", text)


def current_block(text: str, begin: str = BEGIN, end: str = END) -> str:
    start = text.index(begin) + len(begin)
    return text[start : text.index(end, start)].strip("\n")


def write_readme(results: dict[str, Any]) -> None:
    """docs/benchmark.md's figures and the README's cost figures, from ``results``."""
    BENCHMARK.write_text(replace_block(BENCHMARK.read_text(), readme_block(results)))
    README.write_text(replace_block(README.read_text(), readme_cost_block(results), COST_BEGIN, COST_END))


def results_sections(r: dict[str, Any]) -> str:
    """RESULTS.md's sections for the cold imports, detectors, fleet scale and monthly cost."""
    out: list[str] = []
    imports = r.get("cold_imports")
    if imports:
        out += [
            "",
            "## Cold import of each handler module",
            "",
            f"Fresh interpreter per import, median of {imports['repeats']}; `import boto3` alone: "
            f"{imports['boto3_median_ms']} ms." + _against_c7n(imports),
        ]
        if imports.get("c7n"):
            out += [
                "",
                "boto3 and botocore load with a handler's first client, not at its import: 'with first client' is "
                "the import and one client built, what the first event that calls AWS pays."
                + (
                    " 'x c7n.handler': the median, over the handler's samples, of each against the c7n sample "
                    "taken beside it; 'sample by sample': the lowest to the highest of those ratios (the spread the "
                    "shared machine's load leaves); 'CPU': the import's CPU time, which that load moves far less, "
                    "compared the same way."
                    if all("ratio_to_c7n_pairs" in h for h in imports["handlers"].values())
                    else ""
                ),
            ]
        out += ["", *_import_table(imports)]
    detectors = r.get("detector_latency")
    if detectors:
        out += [
            "",
            "## Detector latency per event",
            "",
            f"Pure detector calls on the parsed events/ files, median of {detectors['repeats']:,} calls.",
            "",
            "| event | detector | µs |",
            "|---|---|---:|",
        ]
        out += [f"| {e} | {row['detector']} | {row['median_us']} |" for e, row in detectors["events"].items()]
    fleet = r.get("fleet")
    if fleet:
        out += [
            "",
            "## API calls and peak memory at fleet scale",
            "",
            "Real boto3 clients, answered in-process (bench/fleet.py); each run in a fresh subprocess. Peak is the "
            "subprocess's maximum resident set, including boto3's service models and the in-process answers "
            "('before' is the set after imports, clients and fleet data, before the run).",
            "",
            "| run | instances | API calls | by operation | peak MiB | before MiB | s in process |",
            "|---|---:|---:|---|---:|---:|---:|",
        ]
        for name, row in fleet.items():
            out.append(
                f"| {name.rsplit('_', 1)[0]} | {row['instances']:,} | {row['api_calls_total']:,} | "
                f"{_calls(row['api_calls'])} | {row['peak_rss_mib']} | {row['rss_before_mib']} | "
                f"{row['wall_seconds_in_process']} |"
            )
        first = {k: v["first_run"] for k, v in fleet.items() if k.startswith("reconcile_")}
        out += [""] + [
            f"- First reconcile over {int(k.rsplit('_', 1)[1]):,} instances (no alarms yet): "
            f"{v['alarms_created']:,} alarms created, "
            f"{_calls(v['api_calls'])}."
            for k, v in first.items()
        ]
    costs = r.get("monthly_cost")
    if costs:
        out += cost_section(costs)
    return "\n".join(out) + "\n"


# The cold-import table's columns after the function's name: heading, the handler's field, and whether only a
# run beside c7n measures it. A spread (min, median, max) shows as its min to its max.
IMPORT_COLUMNS = (
    ("ms", "median_ms", False),
    ("with first client, ms", "with_first_client_ms", True),
    ("x boto3", "ratio_to_boto3", False),
    ("x c7n.handler", "ratio_to_c7n", True),
    ("x c7n.handler, sample by sample", "ratio_to_c7n_pairs", True),
    ("CPU ms", "cpu_ms", True),
    ("CPU x c7n.handler", "cpu_ratio_to_c7n", True),
)


def _import_table(imports: dict[str, Any]) -> list[str]:
    """The cold imports, a row a handler: c7n's columns only when the run measured it (and a column only when
    the run recorded it)."""
    handlers = imports["handlers"]
    columns = [
        (head, key)
        for head, key, c7n_only in IMPORT_COLUMNS
        if (imports.get("c7n") or not c7n_only) and all(key in h for h in handlers.values())
    ]
    out = [
        "| function | " + " | ".join(head for head, _ in columns) + " |",
        "|---|" + "---:|" * len(columns),
    ]
    out += [
        f"| {name} | " + " | ".join(_cell(handler[key]) for _, key in columns) + " |"
        for name, handler in handlers.items()
    ]
    return out


def _cell(value: Any) -> str:
    return f"{value['min']} to {value['max']}" if isinstance(value, dict) else str(value)


def _unit_usd(usd: float) -> str:
    """A unit price in full, without trailing zeros or a bare point: 0.0000133334, 0.1, 1, 0."""
    return format(usd, ".10f").rstrip("0").rstrip(".") or "0"


def _bill_table(title: str, month: dict[str, Any]) -> list[str]:
    out = [
        "",
        f"### {title}: ${month['total_usd']:,.2f} a month",
        "",
        "| item | computation | quantity | unit price (USD) | USD | source |",
        "|---|---|---:|---:|---:|---|",
    ]
    out += [
        f"| {line['item']} | {line['how']} | {line['quantity']:,} | {_unit_usd(line['unit_usd'])} "
        f"| {line['usd']:,.2f} | {line['source']} |"
        for line in month["lines"]
    ]
    p = month["prerequisite"]
    out += ["", f"Not costguard's own: {p['item']}, {p['how']}: ${p['usd']:,.2f} a month."]
    return out


def cost_section(costs: dict[str, Any]) -> list[str]:
    """RESULTS.md's monthly bill: prices with their sources, assumptions, the read schedule, each fleet's lines
    with the alarms off (the default) and on."""
    out = [
        "",
        f"## Monthly cost of running costguard ({costs['region']}, prices of {costs['prices_as_of']})",
        "",
        f"Fleet: {costs['fleet']}, with findings (the episodes of the assumptions below). The sweep's reads: "
        f"{_reads(costs['read_schedule'])}.",
        "",
        "Prices (free tiers not subtracted):",
        "",
    ]
    out += [
        f"- `{k}`: ${_unit_usd(p['usd'])} per {p['unit']}, as published on {p['source']}"
        for k, p in costs["prices"].items()
    ]
    out += ["", "Assumptions: " + ", ".join(f"{k} = {v}" for k, v in costs["assumptions"].items()) + "."]
    for size, month in costs["fleets"].items():
        quota = month["metrics_insights_alarms"]["default_quota_per_account_and_region"]
        on = costs["fleets_gpu_alarms_on"][size]
        out += _bill_table(
            f"{int(size):,} GPU instances ({month['gpus']:,} GPUs), GpuAlarms off (the default)", month
        )
        out += _bill_table(f"{int(size):,} GPU instances, GpuAlarms on", on)
        if on["metrics_insights_alarms"]["count"] > quota:
            out += [
                "",
                f"With the alarms on, {on['metrics_insights_alarms']['count']:,} Metrics Insights alarms exceed "
                f"CloudWatch's default quota of {quota} per account and region: raise it first.",
            ]
    bare = costs["without_read_schedule"]
    out += [
        "",
        f"### Without the read schedule ({_reads(bare['read_schedule'])})",
        "",
        "| GPU instances | GpuAlarms off | GpuAlarms on |",
        "|---:|---:|---:|",
    ]
    out += [
        f"| {int(n):,} | ${usd:,.2f} | ${bare['total_usd_gpu_alarms_on'][n]:,.2f} |"
        for n, usd in bare["total_usd"].items()
    ]
    return out


def write_cost_section(results: dict[str, Any]) -> None:
    """Rewrite RESULTS.md's monthly-cost section alone (``python -m bench.costs``: priced again, not measured)."""
    path = ROOT / "bench" / "RESULTS.md"
    text = path.read_text()
    heading = "\n## Monthly cost of running costguard"
    section = "\n".join(cost_section(results["monthly_cost"]))
    if heading not in text:
        path.write_text(text.rstrip("\n") + "\n" + section + "\n")
        return
    start = text.index(heading)
    following = text.find("\n## ", start + len(heading))
    rest = text[following:] if following != -1 else "\n"
    path.write_text(text[:start] + section + rest)


DETECTORS = ROOT / "docs" / "detectors.md"
ADAPTIVE_BEGIN = (
    "<!-- bench-adaptive:begin (written by bench/run.py from bench/results.json: do not edit by hand) -->"
)
ADAPTIVE_END = "<!-- bench-adaptive:end -->"
_POLICIES = ("fixed_30", "fixed_60", "adaptive", "perfect_foresight")


def adaptive_table(results: dict[str, Any]) -> str:
    """docs/detectors.md's table of the idle policies on the generated weeks (``adaptive_policy``): per seed,
    each policy's share of the reclaimable idle dollars, near-misses and stops of labelled work."""
    section = results["adaptive_policy"]
    rows = [
        "| seed | fixed 30 min | fixed 60 min | adaptive | perfect foresight (30-min minimum) |",
        "|---|---|---|---|---|",
    ]
    for seed in section["seeds"]:
        cells = []
        for name in _POLICIES:
            p = seed["policies"][name]
            cell = f"{p['reclaimed_share']:.1%}, {p['near_misses']}, {p['work_stops']}"
            if name == "fixed_30":
                cell = f"{p['reclaimed_share']:.1%}, {p['near_misses']} near-misses, {p['work_stops']} stops of work"
            if name == "adaptive" and seed["seed"] == section["project_seed"]:
                cell = f"**{cell}**"
            cells.append(cell)
        label = (
            f"{seed['seed']} (the project's week)"
            if seed["seed"] == section["project_seed"]
            else str(seed["seed"])
        )
        rows.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def write_adaptive_table(results: dict[str, Any]) -> None:
    DETECTORS.write_text(
        replace_block(DETECTORS.read_text(), adaptive_table(results), ADAPTIVE_BEGIN, ADAPTIVE_END)
    )
