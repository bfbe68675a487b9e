"""The right-sizing audit run locally: statemachine/audit.asl.json executed by the embedded AWS.

moto executes the ASL file itself (the same file the template deploys, its DefinitionSubstitutions resolved
from the template); its Lambda tasks are routed to the real handlers, in this process, and the Map's ResultWriter
writes its children's outcomes as AWS does (local/map_results.py).
"""

from __future__ import annotations

import contextlib
import io
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any
from unittest import mock

from costguard.aws import clients
from costguard.local.buckets import create_bucket
from costguard.local.holdings import HoldingsResponder, seed_holdings
from costguard.local.map_results import documented_result_writer
from costguard.local.stack import PROJECT_ROOT, LocalStack
from costguard.local.template import LOCAL_STACK_NAME, Template, resolve
from costguard.local.world import World

STATE_MACHINE = "AuditStateMachine"
BUCKET = "costguard-audit-reports"
RULES_KEY = "config/rules.json"
EXECUTION_TIMEOUT_SECONDS = 600
_LAMBDA_TASKS = "moto.stepfunctions.parser.asl.component.state.exec.state_task.lambda_eval_utils"


@dataclass
class AuditRun:
    """What a local audit produced: the execution's status and output, the report and the Slack summary."""

    status: str
    output: dict[str, Any]
    report: dict[str, Any] | None
    html: str | None
    slack: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    definition: str = ""  # the definition moto executed
    # The states it entered, in order: the execution's own (a Distributed Map's item states run in child
    # executions, whose histories are their own).
    states: list[str] = field(default_factory=list)
    keys: list[str] = field(default_factory=list)  # what its items wrote, under runs/<run>/
    # What the Map's ResultWriter wrote (its result files and manifest), and the Report step's input.
    map_results: list[str] = field(default_factory=list)
    report_input: dict[str, Any] = field(default_factory=dict)


def state_machine(template: Template) -> dict[str, Any]:
    props: dict[str, Any] = template.resources[STATE_MACHINE]["Properties"]
    return props


def function_arn(logical_id: str, region: str, account: str) -> str:
    return f"arn:aws:lambda:{region}:{account}:function:{LOCAL_STACK_NAME}-{logical_id}"


def definition(template: Template, region: str, account: str, bucket: str = BUCKET) -> str:
    """The ASL file named by DefinitionUri, with its DefinitionSubstitutions filled in as the stack would (the
    audit bucket's name: the local one)."""
    props = state_machine(template)
    text: str = (template.path.parent / props["DefinitionUri"]).read_text(encoding="utf-8")
    for name, value in props.get("DefinitionSubstitutions", {}).items():
        if isinstance(value, dict) and "Fn::GetAtt" in value and value["Fn::GetAtt"][1] == "Arn":
            value = function_arn(value["Fn::GetAtt"][0], region, account)
        elif value == {"Ref": "AuditReportsBucket"}:
            value = bucket
        text = text.replace("${" + name + "}", str(value))
    return text


def audit_environment(template: Template, bucket: str, rules_key: str) -> dict[str, str]:
    """The audit functions' own variables from the template, with the local bucket and rules file."""
    refs = template.parameter_defaults() | {"AuditReportsBucket": bucket}
    if rules_key:
        refs["AuditRulesKey"] = rules_key
    plan = template.resources["AuditPlanFunction"]["Properties"]["Environment"]["Variables"]
    return {k: resolve(v, refs, {}) for k, v in plan.items()}


@contextlib.contextmanager
def lambda_routed_to(stack: LocalStack) -> Iterator[None]:
    """moto's Docker-free Lambda echoes its input; answer each invoke with the named function's real handler."""
    from moto.awslambda_simple.models import LambdaSimpleBackend

    lock = threading.Lock()

    def invoke(
        self: Any, function_name: str, qualifier: Any, body: Any, headers: Any, response_headers: Any
    ) -> bytes:
        logical_id = function_name.rsplit(":", 1)[-1].removeprefix(f"{LOCAL_STACK_NAME}-")
        event = json.loads(body) if body else {}
        try:
            # One at a time: the Map's iterations run in threads, and each invocation's stdout (the metrics
            # Lambda would ship to CloudWatch) is captured by swapping the process-wide sys.stdout.
            with lock:
                result = stack.invoke(logical_id, event).result
        except Exception as error:  # what Lambda reports for an unhandled error: the task fails with it
            response_headers["x-amz-function-error"] = "Unhandled"
            return json.dumps({"errorType": type(error).__name__, "errorMessage": str(error)[:2000]}).encode()
        return json.dumps(result, default=str).encode()

    class RoutedLambda:
        """The Lambda client moto's task states call: straight to ``invoke``, no HTTP and no moto stubber, whose
        global state a test run's earlier mocks could leave unable to intercept the task threads' clients."""

        def invoke(self, FunctionName: str, Payload: Any = None, **_: Any) -> dict[str, Any]:
            body = Payload if isinstance(Payload, str | bytes | None) else json.dumps(Payload)
            headers: dict[str, str] = {}
            answer = invoke(None, FunctionName, None, body, {}, headers)
            response: dict[str, Any] = {"StatusCode": 200, "Payload": io.BytesIO(answer)}
            if "x-amz-function-error" in headers:
                response["FunctionError"] = headers["x-amz-function-error"]
            return response

    routed = RoutedLambda()
    with (
        mock.patch.object(LambdaSimpleBackend, "invoke", invoke),
        mock.patch(f"{_LAMBDA_TASKS}.boto_client_for", lambda *args, **kwargs: routed),
    ):
        yield


@contextlib.contextmanager
def executing_state_machines() -> Iterator[None]:
    """Tell the running mock to execute ASL and to use its Docker-free Lambda."""
    from moto.core.config import default_user_config

    with mock.patch.dict(
        default_user_config,
        {"stepfunctions": {"execute_state_machine": True}, "lambda": {"use_docker": False}},
    ):
        yield


def run_audit(
    world: World,
    *,
    now: datetime | None = None,
    rules_file: str | Path | None = None,
    regions: list[str] | None = None,
    template_path: Path | None = None,
    overrides: dict[str, str] | None = None,
) -> AuditRun:
    """Seed the world, start the state machine and wait for it; the report comes back from S3."""
    template = Template.load(template_path or PROJECT_ROOT / "template.yaml")
    rules_key = RULES_KEY if rules_file else ""
    env = audit_environment(template, BUCKET, rules_key)
    if not env.get("COSTGUARD_REGIONS") and world.organization is not None:
        # The template's default (no regions: the home region's) would hide an organization world's other regions.
        env["COSTGUARD_REGIONS"] = ",".join(world.regions)
    if world.required_tags:
        env["COSTGUARD_REQUIRED_TAGS"] = ",".join(world.required_tags)
    env |= overrides or {}
    with LocalStack(world, template=template, overrides=env) as stack:
        seed_holdings(world)
        clients.calls.clear()  # the seeding's own calls are not the audit's
        HoldingsResponder(world).install()
        create_bucket(world.account, world.region, BUCKET)
        s3: Any = clients.client("s3", world.region)
        if rules_file:
            s3.put_object(Bucket=BUCKET, Key=RULES_KEY, Body=Path(rules_file).read_bytes())
        with executing_state_machines(), lambda_routed_to(stack), documented_result_writer():
            sfn: Any = clients.client("stepfunctions", world.region)
            asl = definition(template, world.region, world.account)
            arn = sfn.create_state_machine(
                name=f"{LOCAL_STACK_NAME}-audit",
                definition=asl,
                roleArn=f"arn:aws:iam::{world.account}:role/{LOCAL_STACK_NAME}-audit",
            )["stateMachineArn"]
            request: dict[str, Any] = {"now": (now or world.now).isoformat()}
            if regions:
                request["regions"] = regions
            # Named as the console and the schedule name them (moto leaves an unnamed execution's name empty).
            name = f"local-{(now or world.now):%Y%m%dT%H%M%SZ}"
            execution = sfn.start_execution(stateMachineArn=arn, name=name, input=json.dumps(request))[
                "executionArn"
            ]
            described = _wait(sfn, execution)
            history = sfn.get_execution_history(executionArn=execution, maxResults=1000)["events"]
            states = [
                e["stateEnteredEventDetails"]["name"] for e in history if "stateEnteredEventDetails" in e
            ]
            report_input: dict[str, Any] = next(
                (
                    json.loads(e["stateEnteredEventDetails"].get("input") or "{}")
                    for e in history
                    if e.get("stateEnteredEventDetails", {}).get("name") == "Report"
                ),
                {},
            )
        keys = _keys(s3, f"runs/{name}/")
        results = _keys(s3, "runs/map-results/")
        status = described["status"]
        output = json.loads(described.get("output") or "{}")
        report = html = None
        if status == "SUCCEEDED":
            report = json.loads(s3.get_object(Bucket=BUCKET, Key=output["report_key"])["Body"].read())
            html = s3.get_object(Bucket=BUCKET, Key=output["html_key"])["Body"].read().decode()
        error = None if status == "SUCCEEDED" else f"{described.get('error')}: {described.get('cause')}"
        return AuditRun(
            status,
            output,
            report,
            html,
            list(stack.sink.messages),
            error,
            asl,
            states,
            keys,
            results,
            report_input,
        )


def _keys(s3: Any, prefix: str) -> list[str]:
    return [
        item["Key"]
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix)
        for item in page.get("Contents", [])
    ]


def _wait(sfn: Any, execution: str) -> dict[str, Any]:
    deadline = time.monotonic() + EXECUTION_TIMEOUT_SECONDS
    pause = 0.05
    while True:
        described: dict[str, Any] = sfn.describe_execution(executionArn=execution)
        if described["status"] != "RUNNING" or time.monotonic() > deadline:
            return described
        # Polling is not free in-process: each DescribeExecution takes the interpreter from the execution's threads.
        time.sleep(pause)
        pause = min(pause * 2, 0.5)


def write_outputs(run: AuditRun, out: Path) -> list[Path]:
    """report.json, report.html and report.csv in ``out``, compared with the report.json already there (the
    previous run's: locally the output folder is the audit bucket, which the embedded AWS empties each run)."""
    out.mkdir(parents=True, exist_ok=True)
    compare_with_previous(run, out / "report.json")
    written = []
    if run.report is not None:
        path = out / "report.json"
        path.write_text(json.dumps(run.report, indent=2, default=str), encoding="utf-8")
        written.append(path)
    if run.html is not None:
        path = out / "report.html"
        path.write_text(run.html, encoding="utf-8")
        written.append(path)
    if run.report is not None:
        from costguard.audit.export import findings_csv

        path = out / "report.csv"
        path.write_text(findings_csv(run.report), encoding="utf-8")
        written.append(path)
    return written


def compare_with_previous(run: AuditRun, previous_path: Path) -> None:
    """The run's report (and page) compared with the report at ``previous_path``, when the run found no previous
    report in its own bucket and there is one there."""
    if run.report is None or (run.report.get("comparison") or {}).get("previous") is not None:
        return
    try:
        previous = json.loads(previous_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    from costguard.audit.report import SCHEMA

    if not isinstance(previous, dict) or previous.get("schema") != SCHEMA:
        return
    from costguard.audit.compare import compare
    from costguard.audit.html import render_html

    comparison = compare(run.report["findings"], previous, key=str(previous_path))
    run.report = run.report | {"comparison": comparison}
    run.html = render_html(run.report)


def _projected(finding: dict[str, Any]) -> str:
    projected = finding.get("projected_gpu_p95_percent")
    return "projection unknown" if projected is None else f"{projected:g}% projected p95"


def _usd(value: float | None, width: int = 0) -> str:
    """A figure as the command prints it; "cost unknown" where there is no price (never $0.00)."""
    return f"{'cost unknown':>{width + 1}}" if value is None else f"${value:>{width},.2f}"


def _finding_line(finding: dict[str, Any]) -> str:
    resource = finding["resource"]
    target = finding["recommended_type"] or "stop"
    if finding["recommended_market"] == "spot":
        target += " (spot)"
    basis = (
        "" if finding.get("cost_basis", "month") == "month" else f" (spent in {finding['cost_hours']:g} h)"
    )
    needs = f"; needs {'; '.join(finding['needs'])}" if finding.get("needs") else ""
    return (
        f"  {_usd(finding['monthly_saving_usd'], 11)}/mo  {finding['reason']:<22} "
        f"{resource['name'] or resource['id']}: {finding['current_type']} -> {target}{basis} "
        f"[{finding['confidence']} confidence, {_projected(finding)}, {finding.get('risk', '?')} risk{needs}]"
    )


def print_headline(report: dict[str, Any]) -> None:
    """The two totals (never one figure to act on), what the resources cost, and the findings under each."""
    totals = report["totals"]
    cost = f"${totals['monthly_cost_usd']:,.2f}"
    if "continuous_monthly_cost_usd" in totals:
        cost += (
            f": ${totals['continuous_monthly_cost_usd']:,.2f} a month for what runs continuously, "
            f"${totals['window_spend_usd']:,.2f} spent over the window by jobs and what did not run all of it"
        )
    if totals.get("unpriced_resources"):
        cost += f"; {totals['unpriced_resources']} of unknown price"
    print(f"Right-sizing audit: {totals['findings']} findings over {totals['resources']} resources ({cost}).")
    if "safe_monthly_saving_usd" not in totals:  # a report made before the two totals
        print(f"  ${totals['monthly_saving_usd']:,.2f}/month to save.")
        for finding in report["findings"]:
            print(_finding_line(finding))
        return
    unpriced = (
        f", {totals['unpriced_findings']} more of unknown price" if totals.get("unpriced_findings") else ""
    )
    groups = (
        (
            "safe_now",
            f"${totals['safe_monthly_saving_usd']:,.2f}/month safe to do now (measured: high confidence, low risk)",
        ),
        (
            "needs_change",
            f"${totals['conditional_monthly_saving_usd']:,.2f}/month more needs a change of code, market or more "
            f"data first{unpriced}",
        ),
    )
    for tier, title in groups:
        print(f"{title}:")
        for finding in report["findings"]:
            if finding.get("tier") == tier:
                print(_finding_line(finding))
    print(
        "  confidence: how sure the measurement is (high: compute and memory measured over the full window); "
        "risk: how likely the target cannot carry the work (low: projected p95 at most 60% per GPU)."
    )


def print_comparison(report: dict[str, Any]) -> None:
    section = report.get("comparison")
    if not section:
        return
    if section.get("previous") is None:
        print(f"Since the previous audit: {section.get('note') or 'no previous report'}.")
        return
    t = section["totals"]
    print(
        f"Since the previous audit ({section['previous'].get('run')}): {t['new']} new "
        f"(${t['new_monthly_saving_usd']:,.2f}/month), {t['resolved']} resolved "
        f"(${t['resolved_monthly_saving_usd']:,.2f}/month), {t['changed']} changed ({t['grown']} grown, "
        f"{'+' if t['changed_delta_usd'] >= 0 else '-'}${abs(t['changed_delta_usd']):,.2f}/month), "
        f"{section['unchanged']} unchanged."
    )


def print_summary(run: AuditRun, written: list[Path]) -> None:
    """What `costguard audit` prints: the totals, one line per finding, failed regions and the files."""
    if run.report is None:
        print(f"costguard audit: the state machine ended {run.status}: {run.error}")
        return
    totals = run.report["totals"]
    print_headline(run.report)
    if totals.get("skipped"):
        cost = totals.get("skipped_monthly_cost_usd")
        print(
            f"  not judged: {totals['skipped']} resources"
            + (f" (${cost:,.2f})" if cost is not None else "")
            + ", listed in the report with why"
        )
    print_comparison(run.report)
    print_endpoints(run.report)
    print_holdings(run.report)
    accounts = run.report.get("accounts") or []
    if len(accounts) > 1:
        for account in accounts:
            label = f"{account['name']} ({account['account']})" if account.get("name") else account["account"]
            failed = f", {len(account['failed'])} FAILED" if account.get("failed") else ""
            print(
                f"  account {label}: ${account['monthly_saving_usd']:,.2f}/month to save, {account['findings']} "
                f"findings over {account['resources']} resources in {', '.join(account['regions'])}{failed}"
            )
    failures = run.report.get("failures")
    if failures is None:  # a report made before the audit iterated accounts
        failures = [{"place": r, "message": "not audited"} for r in totals["failed_regions"]]
    for failure in failures:
        print(
            f"  {failure['place']} FAILED: {failure.get('message') or failure.get('error') or 'not audited'}"
        )
    for path in written:
        print(f"  wrote {path}")


def print_endpoints(report: dict[str, Any]) -> None:
    """GPU endpoint variants by cost per 1,000 requests, a line each (a report made before them has none)."""
    section = report.get("endpoints")
    if not section or not section["rows"]:
        return
    print(f"Endpoints by cost per 1,000 requests ({section['requests']:,} requests in the window):")
    for row in section["rows"]:
        per_1000 = row["cost_per_1000_requests_usd"]
        if per_1000 is not None:
            shown = f"${per_1000:>11,.4f}"
        else:
            shown = "     unknown" if row["hourly_usd"] is None else " no requests"
        fit = row.get("fit")
        cheaper = (
            f"; on {fit['instance_type']}: ${fit['cost_per_1000_requests_usd']:,.4f} "
            f"({_usd(fit['monthly_saving_usd'])}/month less)"
            if fit and fit["cost_per_1000_requests_usd"] is not None
            else ""
        )
        gpu = row["gpu_p95_percent"]
        print(
            f"  {shown}/1k  {row['endpoint']}/{row['variant']}: {row['instance_count']} x {row['instance_type']}, "
            f"{row['requests']:,} requests, GPU p95 {'?' if gpu is None else f'{gpu:g}'}% per GPU{cheaper}"
        )


def print_holdings(report: dict[str, Any]) -> None:
    """The sections beside right-sizing, a line per row (a report made before them has none)."""
    commitments = report.get("commitments")
    if commitments:
        print(f"Commitments: ${commitments['monthly_saving_usd']:,.2f}/month to save (estimated plan rates).")
        for row in commitments["rows"]:
            print(f"  ${row['monthly_saving_usd']:>11,.2f}/mo  commitment_candidate   {row['summary']}")
        if commitments.get("sized_after_advice"):
            names = ", ".join(str(r.get("name") or r["id"]) for r in commitments.get("left_out") or [])
            left = f": left out {names} (commit for their new type once it has run steadily)" if names else ""
            print(
                f"  sized on the fleet after this report's stop and resize advice{left}; "
                f"commit ${commitments['commitment_usd_per_hour']:,.4f}/h in all."
            )
    storage = report.get("orphaned_storage")
    if storage:
        print(f"Orphaned storage: ${storage['monthly_cost_usd']:,.2f}/month, {storage['size_gib']:,g} GiB.")
        for row in storage["rows"]:
            cost = row["monthly_cost_usd"]
            shown = "     unknown" if cost is None else f"${cost:>11,.2f}"
            print(f"  {shown}/mo  orphaned_storage       {row['id']}: {row['summary']}")
    untagged = report.get("untagged_gpu_spend")
    if untagged and untagged.get("checked"):
        missing = ", ".join(
            f"{tag} ${t['monthly_cost_usd']:,.2f}" for tag, t in untagged["by_missing_tag"].items()
        )
        print(
            f"Untagged GPU spend: ${untagged['monthly_cost_usd']:,.2f}/month over {len(untagged['rows'])} "
            f"resources (by missing tag: {missing})."
        )
    optimizer = report.get("compute_optimizer")
    if optimizer and optimizer["rows"]:
        verdicts = optimizer["verdicts"]
        print(
            f"Compute Optimizer alongside: {verdicts['agree']} agree, {verdicts['same direction']} same "
            f"direction, {verdicts['disagree']} disagree."
        )
        for row in optimizer["rows"]:
            if row["verdict"] != "agree":
                print(f"  {row['verdict']:<15} {row.get('name') or row['id']}: {row['why']}")
