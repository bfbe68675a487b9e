"""The deployed stack, played in-process on an embedded AWS (moto) and a local Slack sink."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import logging
import math
import os
import sys
import uuid
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType
from typing import Any
from unittest import mock

from moto import mock_aws
from moto.cloudwatch.models import MetricDatum

from costguard import clock
from costguard.act.ledger_book import INDEX as LEDGER_INDEX
from costguard.aws import clients
from costguard.local.bedrock import publish_bedrock_metrics, world_provisioned_throughputs
from costguard.local.buckets import seed_buckets
from costguard.local.budgets import seed_budgets
from costguard.local.capacity import publish_capacity_metrics, world_capacity_reservations
from costguard.local.dynamo_limits import key_limits
from costguard.local.fast_metrics import indexed_metrics
from costguard.local.history import publish_usage_history
from costguard.local.hyperpod import publish_hyperpod_metrics, world_hyperpod_clusters
from costguard.local.inference_components import world_inference_components
from costguard.local.org import place_client, play_organization, seed_organization
from costguard.local.seed_metrics import datum, datums, publish, remembered, store
from costguard.local.sink import SlackSink
from costguard.local.template import Function, Template, resolve
from costguard.local.training_health import seed_training_health
from costguard.local.world import (
    DEFAULT_CPU_PERCENT,
    DEFAULT_NETWORK_MB_PER_MINUTE,
    Endpoint,
    GpuMetrics,
    Instance,
    World,
    gpu_series,
)
from costguard.model import MARK_TAG_KEY, ResourceKind

PROJECT_ROOT = Path(__file__).resolve().parents[3]
DEFAULT_TEMPLATE = PROJECT_ROOT / "template.yaml"
# The world the local commands play when none is given (`demo`, `audit`, `doctor --world`, ...).
DEMO_WORLD = PROJECT_ROOT / "worlds" / "demo.yaml"

# Physical names of the stack's resources in the embedded AWS.
TABLE = "costguard-state"
QUEUES = {  # the dead-letter queue first: the decisions queue's redrive policy names it
    "DecisionsDeadLetterQueue": "costguard-decisions-dlq",
    "DecisionsQueue": "costguard-decisions",
    "UrgentDecisionsQueue": "costguard-urgent-decisions",
    "FailedEventsQueue": "costguard-failed-events",
}
SECRET = "costguard/slack-webhook"  # noqa: S105 (a secret name, not a secret)
MAX_RECEIVE_COUNT = 12  # the template's, for both decisions queues (tests/template holds them equal)


# How far past the world's now the local stack seeds metric series for events dated later (seeding costs about
# two seconds per simulated day of the demo world). The demo's events run to 12 hours past its now.
SEED_AHEAD = timedelta(days=2)


def seed_horizon(world: World, until: datetime | None) -> datetime | None:
    """``until``, capped to SEED_AHEAD past the world's now; None (the world's now) stays None."""
    if until is None:
        return None
    return min(until, world.now + SEED_AHEAD)


@dataclass
class LambdaContext:
    """Enough of Lambda's context object for powertools."""

    function_name: str
    memory_limit_in_mb: int = 512
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    invoked_function_arn: str = ""
    log_group_name: str = ""
    log_stream_name: str = "local"

    def get_remaining_time_in_millis(self) -> int:
        return 60_000


@dataclass
class Invocation:
    function: str
    result: Any
    output: str


class LocalStack:
    """Starts moto, creates the stack's resources, seeds the world and runs handlers in-process."""

    def __init__(
        self,
        world: World,
        *,
        mode: str | None = None,
        template: Template | None = None,
        sink: SlackSink | None = None,
        routes: dict[str, str] | None = None,
        overrides: dict[str, str] | None = None,
        until: datetime | None = None,
        slack_app: bool = False,
        batch_window: timedelta | None = None,
    ) -> None:
        self.world = world
        # The notifier's SQS batching window (MaximumBatchingWindowInSeconds), played on the clock: what is
        # queued waits until an event comes in past the window (or flush()), then is told as one batch. None:
        # each event's notices are told as soon as it has run.
        self.batch_window = batch_window
        self._pending_since: datetime | None = None
        # A Slack app (bot token, signing secret) instead of webhooks, and the interactions queues
        # (local/interactions.py).
        self.slack_app = slack_app
        # Metric series run on to here: the clock may move past the world's now (an event's own time). Never
        # further than SEED_AHEAD past the world's now: an event dated 2099 must not seed 70 years of points.
        self.until = seed_horizon(world, until)
        self.requested_until = until
        self.template = template or Template.load(DEFAULT_TEMPLATE)
        self.mode = mode
        self.sink = sink or SlackSink()
        self.routes = routes or {}
        self.overrides = overrides or {}
        self.urls: dict[str, str] = {}
        self.consumed: list[str] = []  # bodies the queue consumer accepted, oldest first
        self._modules: dict[str, ModuleType] = {}
        self._exit = contextlib.ExitStack()
        # The local Kubernetes API of the world's EKS clusters (local/kube_responder.py), once started.
        self.kube: Any = None

    # -- lifecycle -------------------------------------------------------------------------
    def __enter__(self) -> LocalStack:
        self._exit.enter_context(warnings.catch_warnings())
        warnings.filterwarnings("ignore", message="No application metrics to publish")
        self._exit.enter_context(patched_environ(self._base_environment()))
        if self.sink._server is None:
            self._exit.enter_context(self.sink)
        self._exit.enter_context(mock_aws())
        self._exit.enter_context(key_limits())  # DynamoDB's key limits on every call (local/dynamo_limits.py)
        self._exit.enter_context(indexed_metrics())
        self._exit.enter_context(moto_stop_training_job())
        if self.world.organization is not None:
            self._exit.enter_context(play_organization())
        self.capacity = self._exit.enter_context(world_capacity_reservations(self.world))
        self.bedrock = self._exit.enter_context(world_provisioned_throughputs(self.world))
        self._exit.enter_context(world_inference_components(self.world))
        self._exit.enter_context(world_hyperpod_clusters(self.world))
        self._exit.callback(clock.freeze, None)
        _reset_process_caches()
        clients.calls.clear()
        self._create_resources()
        os.environ.update(self._function_environment())
        from costguard.observability import logger

        level = os.environ.get("POWERTOOLS_LOG_LEVEL", "WARNING")
        logger.setLevel(level)
        for name in list(logging.Logger.manager.loggerDict):
            if name.startswith("costguard."):  # powertools child loggers took their level at import
                logging.getLogger(name).setLevel(level)
        route_logs_to_stderr()
        seed_organization(self.world)
        for place in self.world.places():  # the hub's account and region, then each member's
            seed_world(place, self.until)
        seed_buckets(self.world)  # where the training jobs' inputs live (data_cross_region)
        for place in self.world.places():
            seed_mark_records(place)
            seed_arming_records(place)
        self._seed_eks()  # clusters in the embedded EKS, their API on the local Kubernetes responder
        clock.freeze(self.world.now)
        clients.calls.clear()
        return self

    def __exit__(self, *_: object) -> None:
        self._exit.close()
        _reset_process_caches()

    def _seed_eks(self) -> None:
        from costguard.local.eks_seed import publish_cluster_metrics, seed_clusters
        from costguard.local.kube_responder import KubeResponder

        places = self.world.places()
        clusters = [c for place in places for c in place.eks_clusters]
        self.kube = self._exit.enter_context(KubeResponder(clusters, self.world.now))
        for place in places:
            seed_clusters(place, self.kube)
            publish_cluster_metrics(place, self.until)

    def _base_environment(self) -> dict[str, str]:
        # The template's literal variables (POWERTOOLS_*) before anything imports powertools.
        static = {k: str(v) for k, v in self.template.global_environment().items() if not isinstance(v, dict)}
        return static | {
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_SESSION_TOKEN": "testing",
            "AWS_DEFAULT_REGION": self.world.region,
            "AWS_REGION": self.world.region,
            "MOTO_ACCOUNT_ID": self.world.account,
            "POWERTOOLS_TRACE_DISABLED": "true",
            "POWERTOOLS_DEV": "false",
            "MOTO_EC2_LOAD_DEFAULT_AMIS": "false",
        }

    def _create_resources(self) -> None:
        create_state_table(clients.client("dynamodb"), TABLE)
        sqs: Any = clients.client("sqs")
        for logical, name in QUEUES.items():
            attributes = {"VisibilityTimeout": "0"}
            if logical in ("DecisionsQueue", "UrgentDecisionsQueue"):
                dlq = self.urls["DecisionsDeadLetterQueue"]
                dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"][
                    "QueueArn"
                ]
                attributes["RedrivePolicy"] = json.dumps(
                    {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": MAX_RECEIVE_COUNT}
                )
            self.urls[logical] = sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]
        self._create_work_queues(sqs)
        secret = json.dumps({"default": self.sink.url, "routes": self.routes})
        if self.slack_app:
            from costguard.local.interactions import app_secret, create_interaction_queues

            self.urls.update(create_interaction_queues(sqs, MAX_RECEIVE_COUNT))
            secret = json.dumps(app_secret(self.routes))
        self.urls["SlackWebhookSecret"] = clients.client("secretsmanager").create_secret(
            Name=SECRET, SecretString=secret
        )["ARN"]

    def _create_work_queues(self, sqs: Any) -> None:
        """The sweeps' work queues and their dead-letter queue, as the template names them."""
        queues = {
            logical: resource.get("Properties", {})
            for logical, resource in self.template.resources.items()
            if resource.get("Type") == "AWS::SQS::Queue" and logical not in self.urls and "Sweep" in logical
        }
        for logical in sorted(queues, key=lambda name: "DeadLetter" not in name):  # dead-letter queues first
            attributes = {"VisibilityTimeout": "0"}
            redrive = queues[logical].get("RedrivePolicy")
            if isinstance(redrive, dict):
                target = redrive.get("deadLetterTargetArn", {})
                dlq = target.get("Fn::GetAtt", [None])[0] if isinstance(target, dict) else None
                if dlq in self.urls:
                    arn = sqs.get_queue_attributes(QueueUrl=self.urls[dlq], AttributeNames=["QueueArn"])
                    attributes["RedrivePolicy"] = json.dumps(
                        {
                            "deadLetterTargetArn": arn["Attributes"]["QueueArn"],
                            "maxReceiveCount": int(redrive.get("maxReceiveCount", MAX_RECEIVE_COUNT)),
                        }
                    )
            name = f"costguard-{logical}"
            self.urls[logical] = sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]

    def _pseudo_parameters(self) -> dict[str, str]:
        org = self.world.organization
        return {
            "AWS::AccountId": self.world.account,
            "AWS::Region": self.world.region,
            "AWS::Partition": "aws",
            "AWS::StackName": "costguard",
            **({"OrganizationId": org.id, "MemberRoleName": org.role} if org else {}),
        }

    def _conditions(self) -> dict[str, bool]:
        return {
            "CreateSlackSecret": True,
            "IsOrganization": self.world.organization is not None,
            "SlackAppOn": self.slack_app,  # the interactions endpoint, its queues and its worker
        }

    def _organization_environment(self) -> dict[str, str]:
        """An organization world runs the stack as its hub: the member role name, the hub's account, every
        region the world names."""
        org = self.world.organization
        if org is None:
            return {}
        return {
            "COSTGUARD_MEMBER_ROLE_NAME": org.role,
            "COSTGUARD_HOME_ACCOUNT": self.world.account,
            "COSTGUARD_REGIONS": ",".join(self.world.regions),
        }

    def _own_environment(self, function: Function) -> dict[str, str]:
        """A function's own variables (its sweep queue's URL, say), resolved as the stack would."""
        props = self.template.resources[function.logical_id].get("Properties", {})
        variables = (props.get("Environment") or {}).get("Variables") or {}
        refs = self.template.parameter_defaults() | dict(self.urls) | self._pseudo_parameters()
        conditions = self._conditions()
        own = {}
        for name, value in variables.items():
            try:
                own[name] = str(resolve(value, refs, conditions))
            except (KeyError, ValueError):
                continue  # a resource the local stack does not create (the ops topic): the global value stays
        return own

    def _function_environment(self) -> dict[str, str]:
        refs = self.template.parameter_defaults()
        if self.mode:
            refs["Mode"] = self.mode
        refs.update(
            {
                "StateTable": TABLE,
                "DecisionsQueue": self.urls["DecisionsQueue"],
                "UrgentDecisionsQueue": self.urls["UrgentDecisionsQueue"],
                "FailedEventsQueue": self.urls["FailedEventsQueue"],
                "SlackWebhookSecret": self.urls["SlackWebhookSecret"],
                "SlackWebhookSecretArn": "",
                **self._pseudo_parameters(),
            }
        )
        conditions = self._conditions()
        env = {k: resolve(v, refs, conditions) for k, v in self.template.global_environment().items()}
        if self.slack_app:
            from costguard.local.interactions import interaction_environment

            env.update(interaction_environment(self.urls, self.sink))
        env.update(self._organization_environment())
        if self.world.bedrock_throughput_prices:
            env["COSTGUARD_BEDROCK_THROUGHPUT_PRICES"] = self.world.bedrock_throughput_prices
        env.update(self.overrides)
        return env

    # -- running functions -----------------------------------------------------------------
    def module(self, function: Function) -> ModuleType:
        if function.logical_id not in self._modules:
            name = f"costguard_fn_{function.logical_id}_{uuid.uuid4().hex[:8]}"
            spec = importlib.util.spec_from_file_location(name, function.module_path)
            assert spec and spec.loader, f"cannot load {function.module_path}"
            module = importlib.util.module_from_spec(spec)
            from costguard.settings import get_settings

            # Its own variables that the local stack has not set itself (overrides, the interactions' settings).
            own = {k: v for k, v in self._own_environment(function).items() if k not in os.environ}
            get_settings.cache_clear()  # its module-level settings are read at import, with its own variables
            with _quiet(), patched_environ(own):
                spec.loader.exec_module(module)
            get_settings.cache_clear()
            self._modules[function.logical_id] = module
        return self._modules[function.logical_id]

    def invoke(self, logical_id: str, event: Any) -> Invocation:
        function = self.template.functions()[logical_id]
        handler: Callable[[Any, Any], Any] = getattr(self.module(function), function.handler_name)
        buffer = io.StringIO()
        clients.enter_account(None)  # a fresh invocation: no account from the previous one's event
        with contextlib.redirect_stdout(buffer):
            result = handler(event, LambdaContext(function_name=logical_id))
        return Invocation(logical_id, result, buffer.getvalue())

    def drain(self, queue_logical_id: str | None = None, max_rounds: int = 50) -> list[Invocation]:
        """Play Lambda's SQS event source mapping until the queue is empty (or only failures remain). No queue
        named: the notifier's two, the urgent one first."""
        if queue_logical_id is None:
            return [
                *self.drain("UrgentDecisionsQueue", max_rounds),
                *self.drain("DecisionsQueue", max_rounds),
            ]
        consumer = self.template.queue_consumer(queue_logical_id)
        assert consumer, f"no function consumes {queue_logical_id}"
        url = self.urls[queue_logical_id]
        sqs: Any = clients.client("sqs")
        invocations = []
        batch_size = self.template.batch_size(consumer.logical_id, queue_logical_id)
        for _ in range(max_rounds):
            received: list[dict[str, Any]] = []
            while len(received) < batch_size:  # Lambda's poller gathers up to the batch size
                got = sqs.receive_message(
                    QueueUrl=url,
                    MaxNumberOfMessages=min(10, batch_size - len(received)),
                    AttributeNames=["All"],
                    VisibilityTimeout=300,  # not again in this batch; returned below unless told
                ).get("Messages", [])
                if not got:
                    break
                received.extend(got)
            if not received:
                break
            event = {"Records": [_sqs_record(m, url, _clock_offset_ms()) for m in received]}
            try:
                invocation = self.invoke(consumer.logical_id, event)
            except Exception as error:  # Lambda returns the whole batch to the queue
                invocations.append(Invocation(consumer.logical_id, {"error": str(error)}, ""))
                failed = {m["MessageId"] for m in received}
            else:
                invocations.append(invocation)
                failed = {f["itemIdentifier"] for f in (invocation.result or {}).get("batchItemFailures", [])}
            done = [m for m in received if m["MessageId"] not in failed]
            for m in received:
                if m["MessageId"] in failed:  # back on the queue at once (then its dead-letter queue)
                    sqs.change_message_visibility(
                        QueueUrl=url, ReceiptHandle=m["ReceiptHandle"], VisibilityTimeout=0
                    )
            self.consumed.extend(m["Body"] for m in done)
            for start in range(0, len(done), 10):
                sqs.delete_message_batch(
                    QueueUrl=url,
                    Entries=[
                        {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]}
                        for i, m in enumerate(done[start : start + 10])
                    ],
                )
        return invocations

    def work_queue_of(self, logical_id: str) -> str | None:
        """The sweep work queue a function consumes (an organization's sweep fans out onto it), if any."""
        for queue in self.urls:
            consumer = self.template.queue_consumer(queue) if "Sweep" in queue else None
            if consumer is not None and consumer.logical_id == logical_id:
                return queue
        return None

    def sweep(self, logical_id: str, event: Any) -> list[Invocation]:
        """A scheduled sweep: the function's run, then (an organization fans out) each work item its queue
        holds, as Lambda's event source mapping would deliver them."""
        runs = [self.invoke(logical_id, event)]
        queue = self.work_queue_of(logical_id)
        if queue is not None and self.world.organization is not None:
            runs += self.drain(queue)
        return runs

    def run_work_items(self, logical_id: str) -> dict[str, Any]:
        """Deliver the work items a fanned-out sweep queued, and gather what each found (its invocation returns
        only the batch response): the findings and decisions as one run's summary would list them."""
        from costguard.flows import org

        queue = self.work_queue_of(logical_id)
        if queue is None:
            return {}
        reports: list[Any] = []
        org.item_observers.append(lambda item, report: reports.append(report))
        try:
            runs = self.drain(queue)
        finally:
            org.item_observers.clear()
        summary: dict[str, Any] = {"findings": [], "decisions": []}
        for report in reports:
            done = report.summary()
            summary["findings"] += done.get("findings", [])
            summary["decisions"] += done.get("decisions", [])
        failed = [f for run in runs for f in (run.result or {}).get("batchItemFailures", [])]
        summary["item_failures"] = len(failed)
        return summary

    def window_passes(self, at: datetime | None = None) -> None:
        """Before an event arriving ``at`` (default the clock's now): tell what the notifier held if its
        batching window closed by then."""
        since, at = self._pending_since, at or clock.now()
        if since is not None and self.batch_window is not None and at >= since + self.batch_window:
            self.flush()

    def queued(self, at: datetime | None = None) -> None:
        """After an event that arrived ``at``: its urgent notices told now (no batching window on their queue),
        the rest now too, or the batching window opened on them."""
        self.drain("UrgentDecisionsQueue")
        if self.batch_window is None:
            self.drain("DecisionsQueue")
        elif self._pending_since is None and self.queue_depth("DecisionsQueue"):
            self._pending_since = at or clock.now()

    def flush(self) -> list[dict[str, Any]]:
        """Tell whatever the batching window still holds; the messages it posted."""
        before = len(self.sink.messages)
        self._pending_since = None
        self.drain()
        return self.sink.messages[before:]

    def queue_depth(self, queue_logical_id: str) -> int:
        attributes = clients.sqs().get_queue_attributes(
            QueueUrl=self.urls[queue_logical_id], AttributeNames=["ApproximateNumberOfMessages"]
        )["Attributes"]
        return int(attributes["ApproximateNumberOfMessages"])


def _clock_offset_ms() -> int:
    """How far the stack's clock is from the wall clock moto stamps messages with, in milliseconds."""
    return int((datetime.now(UTC) - clock.now()).total_seconds() * 1000)


def _sqs_record(message: dict[str, Any], url: str, offset_ms: int = 0) -> dict[str, Any]:
    """One message as Lambda's event source hands it over. moto stamps SentTimestamp with the wall clock; it
    is moved onto the stack's clock (a world's time), as SQS would have stamped it then."""
    attributes = dict(message.get("Attributes", {}))
    if str(attributes.get("SentTimestamp", "")).isdigit():
        attributes["SentTimestamp"] = str(int(attributes["SentTimestamp"]) - offset_ms)
    return {
        "messageId": message["MessageId"],
        "receiptHandle": message["ReceiptHandle"],
        "body": message["Body"],
        "attributes": attributes,
        "messageAttributes": {},
        "md5OfBody": message["MD5OfBody"],
        "eventSource": "aws:sqs",
        "eventSourceARN": ":".join(
            ["arn:aws:sqs", os.environ["AWS_REGION"], os.environ["MOTO_ACCOUNT_ID"], url.rsplit("/", 1)[-1]]
        ),
        "awsRegion": os.environ["AWS_REGION"],
    }


# The image of every instance a world seeds: any id does for moto, which does not check it.
STAND_IN_IMAGE = "ami-0c55b159cbfafe1f0"


UNSAID_LAUNCH_AGE = timedelta(days=30)  # an instance of a world that names no launch time: running a month


def seed_world(world: World, until: datetime | None = None) -> None:
    """Create the world's instances (with the world's own ids) and SageMaker resources, and publish their
    metrics."""
    seed_sagemaker(world, until or world.now)
    seed_training_health(world, until or world.now)  # the jobs' own metrics and checkpoint objects
    publish_capacity_metrics(world, until or world.now)
    publish_bedrock_metrics(world, until or world.now)
    if world.hyperpod_clusters:  # the nodes' GPU series (local/hyperpod.py)
        types = {g.instance_type for c in world.hyperpod_clusters for g in c.instance_groups}
        publish_hyperpod_metrics(world, _gpus_of(types, world.region), until or world.now)
    seed_budgets(world)
    if not world.instances:
        return
    from moto.ec2.models import ec2_backends  # the embedded AWS only

    ec2: Any = place_client("ec2", world.account, world.region)
    backend = ec2_backends[world.account][world.region]
    # moto checks no image id, and costguard reads none: the stack does not load moto's 1,300 stock AMIs
    # (MOTO_EC2_LOAD_DEFAULT_AMIS), which took a third of a second of every region's start.
    image = STAND_IN_IMAGE
    gpu_info: dict[str, dict[str, Any]] = {}
    for spec in world.instances:
        market = {"InstanceMarketOptions": {"MarketType": "spot"}} if spec.lifecycle == "spot" else {}
        made = ec2.run_instances(ImageId=image, InstanceType=spec.type, MinCount=1, MaxCount=1, **market)
        instance = backend.get_instance_by_id(made["Instances"][0]["InstanceId"])
        assert instance is not None
        instance.id = spec.id  # moto assigns random ids; the world's events name real-looking ones
        # Launched as the world says, else well before the world's now (moto would say the machine's own clock,
        # which can be after the world's: a run that starts after the marks written in it).
        instance.launch_time = spec.launched or world.now - UNSAID_LAUNCH_AGE
        tags = {**spec.tags, **({"Name": spec.name} if spec.name else {})}
        if tags:
            ec2.create_tags(Resources=[spec.id], Tags=[{"Key": k, "Value": v} for k, v in tags.items()])
        if spec.state in ("stopped", "stopping"):
            ec2.stop_instances(InstanceIds=[spec.id])
        elif spec.state == "terminated":
            ec2.terminate_instances(InstanceIds=[spec.id])
        if spec.type not in gpu_info:
            described = ec2.describe_instance_types(InstanceTypes=[spec.type])["InstanceTypes"]
            gpu_info[spec.type] = described[0].get("GpuInfo", {}) if described else {}
    publish_metrics(world, gpu_info, until or world.now)
    publish_usage_history(world, gpu_info)  # the audit's hourly history (local/history.py)


def seed_mark_records(world: World) -> None:
    """A mark tag the world file gives a resource is one costguard wrote earlier: its record, as costguard keeps it
    (act/marks.py). A mark written after the stack starts, through the API, has none (as anyone else's has none)."""
    from costguard.act.marks import DynamoMarkRecords
    from costguard.act.shadow import Shadow, key_of

    kinds = (
        (ResourceKind.EC2_INSTANCE, [(i.id, i.tags) for i in world.instances]),
        (ResourceKind.TRAINING_JOB, [(j.name, j.tags) for j in world.training_jobs]),
        (ResourceKind.NOTEBOOK, [(n.name, n.tags) for n in world.notebooks]),
        (ResourceKind.CAPACITY_RESERVATION, [(c.id, c.tags) for c in world.capacity_reservations]),
        (ResourceKind.PROVISIONED_THROUGHPUT, [(p.name, p.tags) for p in world.provisioned_throughputs]),
    )
    records = DynamoMarkRecords(TABLE)
    for kind, specs in kinds:
        for resource_id, tags in specs:
            if MARK_TAG_KEY in tags:
                key = key_of(world.account, world.region, kind, resource_id)
                records._put(key, Shadow(mark=tags[MARK_TAG_KEY]), world.now)


def create_state_table(dynamodb: Any, name: str) -> None:
    """The state table as template.yaml's StateTable: the ``id`` key, and the savings ledger's sparse index."""
    dynamodb.create_table(
        TableName=name,
        AttributeDefinitions=[
            {"AttributeName": key, "AttributeType": "S"} for key in ("id", "ledger_team", "ledger_at")
        ],
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        GlobalSecondaryIndexes=[
            {
                "IndexName": LEDGER_INDEX,
                "KeySchema": [
                    {"AttributeName": "ledger_team", "KeyType": "HASH"},
                    {"AttributeName": "ledger_at", "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "ALL"},
            }
        ],
        BillingMode="PAY_PER_REQUEST",
    )


# When costguard last listed the world's resources before the stack starts: every resource of the world file
# was there, with the tags it gives it.
LAST_CENSUS = timedelta(minutes=15)


def seed_arming_records(world: World) -> None:
    """The world file's resources are ones costguard has watched (act/arming.py): each kind's census, and the arming
    tags the file gives a resource as costguard first saw them. A tag added through the API after the stack starts
    was added later, as anyone's would be."""
    from costguard.act.arming import DynamoArmingRecords, FirstSeen, arming_tags, scope_of
    from costguard.act.shadow import key_of

    kinds = (
        (ResourceKind.TRAINING_JOB, [(j.name, j.tags) for j in world.training_jobs]),
        (ResourceKind.CAPACITY_RESERVATION, [(c.id, c.tags) for c in world.capacity_reservations]),
        (ResourceKind.PROVISIONED_THROUGHPUT, [(p.name, p.tags) for p in world.provisioned_throughputs]),
    )
    records = DynamoArmingRecords(TABLE)
    seen = world.now - LAST_CENSUS
    for kind, specs in kinds:
        records.census(scope_of(world.account, world.region, kind), seen)
        for resource_id, tags in specs:
            armed = arming_tags(tags)
            if armed:
                key = key_of(world.account, world.region, kind, resource_id)
                records.keep(key, FirstSeen(tags=armed, seen=seen), seen)


def _ran(spec: Instance, now: datetime, until: datetime) -> Callable[[datetime], bool]:
    """Whether the instance ran at a time: its owner's running periods (``timeline``, ``launched``), the last
    running on past ``now`` to ``until`` when it is running at ``now``."""
    since = now - timedelta(minutes=spec.gpu_metrics.lookback_minutes)
    periods = spec.running_periods(since, now)
    if periods and periods[-1][1] == now:
        periods[-1] = (periods[-1][0], max(now, until) + timedelta(minutes=1))
    return lambda at: any(start <= at < end for start, end in periods)


# An instance whose GPUs all idle in a minute, and whose world gives no CPU or network figure of its own, is an
# idle host in that minute to EC2's own metrics (detect/host_evidence.py reads them): its agents' CPU and traffic.
QUIET_GPU_PERCENT = 5.0
QUIET_HOST_CPU = 1.0
QUIET_HOST_NETWORK_MB = 0.05  # in; out is a tenth of in


def publish_metrics(world: World, gpu_info: dict[str, dict[str, Any]], until: datetime) -> None:
    """The CloudWatch agent's per-GPU series, and EC2's CPU and network series, for running instances."""
    key = ("instances", world.model_dump_json(), json.dumps(gpu_info, sort_keys=True, default=str), until)
    store(world.account, world.region, remembered(key, lambda: _instance_metrics(world, gpu_info, until)))


def _instance_metrics(
    world: World, gpu_info: dict[str, dict[str, Any]], until: datetime
) -> list[MetricDatum]:
    batches: dict[str, list[dict[str, Any]]] = {"CWAgent": [], "AWS/EC2": []}
    for spec in world.instances:
        gpus = gpu_info.get(spec.type, {}).get("Gpus", [])
        count = sum(g.get("Count", 0) for g in gpus)
        model = gpus[0].get("Name", "GPU") if gpus else "GPU"
        if spec.state != "running":
            continue
        ran = _ran(spec, world.now, until)
        quiet: dict[datetime, int] = {}  # the GPUs under the idle threshold, by minute
        for index in range(count):
            dims = [
                {"Name": "InstanceId", "Value": spec.id},
                {"Name": "index", "Value": str(index)},
                {"Name": "name", "Value": model},
            ]
            for at, value in gpu_series(spec.gpu_metrics, index, world.now, until):
                if ran(at):
                    batches["CWAgent"].append(datum("nvidia_smi_utilization_gpu", dims, at, value, "Percent"))
                    quiet[at] = quiet.get(at, 0) + (value < QUIET_GPU_PERCENT)
        ec2_dims = [{"Name": "InstanceId", "Value": spec.id}]
        clock_only = spec.gpu_metrics.model_copy(update={"pattern": "idle", "gpus": []})
        # EC2's own CPU and network: the world's figures when it gives them; else an idle host's in the minutes
        # every GPU is idle (as a host whose GPUs nobody uses is), and the defaults in any other minute.
        for at, _ in gpu_series(clock_only, 0, world.now, until):
            if not ran(at):
                continue  # EC2 publishes nothing while its owner has it stopped
            idle_host = count > 0 and quiet.get(at) == count
            cpu = spec.cpu_percent
            if cpu is None:
                cpu = QUIET_HOST_CPU if idle_host else DEFAULT_CPU_PERCENT
            network = spec.network_in_mb_per_minute
            if network is None:
                network = QUIET_HOST_NETWORK_MB if idle_host else DEFAULT_NETWORK_MB_PER_MINUTE
            batches["AWS/EC2"].append(datum("CPUUtilization", ec2_dims, at, cpu, "Percent"))
            batches["AWS/EC2"].append(datum("NetworkIn", ec2_dims, at, network * 1e6, "Bytes"))
            batches["AWS/EC2"].append(datum("NetworkOut", ec2_dims, at, network * 1e5, "Bytes"))
    return [d for namespace, data in batches.items() for d in datums(namespace, data)]


# -- SageMaker ------------------------------------------------------------------------------------

SAGEMAKER_IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.5-gpu-py311"
# moto checks notebook and endpoint instance types against old lists (no ml.g5, ml.g6...): a notebook or an
# endpoint configuration of a newer type is created with these, then given the world's type directly in moto's
# backend object.
MOTO_NOTEBOOK_TYPE = "ml.t3.medium"
MOTO_ENDPOINT_TYPE = "ml.m5.large"
ENDPOINT_AGE = timedelta(days=30)  # an endpoint's default age: older than any idle window
INVOCATIONS_LOOKBACK = timedelta(hours=48)
JOB_LOOKBACK_MINUTES = 180
_SECONDARY_STATUS = {"InProgress": "Training", "Stopping": "Stopping"}


def seed_sagemaker(world: World, until: datetime) -> None:
    """Create the world's training jobs, notebook instances and endpoints in moto and publish their metrics."""
    if not (world.training_jobs or world.notebooks or world.endpoints):
        return
    from moto.sagemaker.models import sagemaker_backends  # the embedded AWS only

    sagemaker: Any = place_client("sagemaker", world.account, world.region)
    backend = sagemaker_backends[world.account][world.region]
    role = f"arn:aws:iam::{world.account}:role/costguard-demo-sagemaker"
    _seed_training_jobs(world, sagemaker, backend, role)
    _seed_notebooks(world, sagemaker, backend, role)
    _seed_endpoints(world, sagemaker, backend, role)
    types = {j.instance_type for j in world.training_jobs} | {n.instance_type for n in world.notebooks}
    types |= {e.instance_type for e in world.endpoints}
    publish_sagemaker_metrics(world, _gpus_of(types, world.region), until)


def _seed_training_jobs(world: World, sagemaker: Any, backend: Any, role: str) -> None:
    """The world's training jobs in moto, with the world's status and times (moto creates them Completed)."""
    for job in world.training_jobs:
        sagemaker.create_training_job(
            TrainingJobName=job.name,
            AlgorithmSpecification={"TrainingImage": SAGEMAKER_IMAGE, "TrainingInputMode": "File"},
            RoleArn=role,
            InputDataConfig=[
                {
                    "ChannelName": "train",
                    "DataSource": {
                        "S3DataSource": {
                            "S3DataType": "S3Prefix",
                            "S3Uri": f"s3://{world.account}-data/{job.name}/",
                        }
                    },
                }
            ],
            OutputDataConfig={"S3OutputPath": f"s3://{world.account}-artifacts/"},
            ResourceConfig={
                "InstanceType": job.instance_type,
                "InstanceCount": job.instance_count,
                "VolumeSizeInGB": 100,
            },
            StoppingCondition=(
                {"MaxRuntimeInSeconds": job.max_runtime_seconds} if job.max_runtime_seconds else {}
            ),
            EnableManagedSpotTraining=job.managed_spot,
            **({"CheckpointConfig": {"S3Uri": job.checkpoint_s3_uri}} if job.checkpoint_s3_uri else {}),
            Tags=_tag_list(job.tags),
        )
        # moto creates every training job Completed: the world's status and times go into its backend.
        made: Any = backend.training_jobs[job.name]
        made.training_job_status = job.status
        made.secondary_status = _SECONDARY_STATUS.get(job.status, job.status)
        if job.started:
            made.creation_time = made.training_start_time = made.last_modified_time = job.started
        if job.status in ("InProgress", "Stopping"):
            made.training_end_time = None


def _seed_notebooks(world: World, sagemaker: Any, backend: Any, role: str) -> None:
    """The world's notebook instances in moto, with the world's type and status (moto's list of notebook types
    is old: a type it refuses is created as another, then set in its backend)."""
    for notebook in world.notebooks:
        request = {
            "NotebookInstanceName": notebook.name,
            "InstanceType": notebook.instance_type,
            "RoleArn": role,
            "Tags": _tag_list(notebook.tags),
        }
        try:
            sagemaker.create_notebook_instance(**request)
        except sagemaker.exceptions.ClientError as error:
            if "instanceType" not in str(error):
                raise
            sagemaker.create_notebook_instance(**(request | {"InstanceType": MOTO_NOTEBOOK_TYPE}))
            backend.notebook_instances[notebook.name].instance_type = notebook.instance_type
        backend.notebook_instances[notebook.name].status = notebook.status


def _seed_endpoints(world: World, sagemaker: Any, backend: Any, role: str) -> None:
    """The world's endpoints in moto (a model, a one-variant config, the endpoint), created when the world
    says."""
    for endpoint in world.endpoints:
        model = f"{endpoint.name}-model"
        sagemaker.create_model(
            ModelName=model, ExecutionRoleArn=role, PrimaryContainer={"Image": SAGEMAKER_IMAGE}
        )
        variant = {
            "VariantName": endpoint.variant,
            "ModelName": model,
            "InitialInstanceCount": endpoint.instance_count,
            "InstanceType": endpoint.instance_type,
        }
        config = f"{endpoint.name}-config"
        extra: dict[str, Any] = {}
        if endpoint.kind == "async":
            output = {"S3OutputPath": f"s3://{world.account}-artifacts/{endpoint.name}/async/"}
            extra["AsyncInferenceConfig"] = {"OutputConfig": output}
        try:
            sagemaker.create_endpoint_config(EndpointConfigName=config, ProductionVariants=[variant], **extra)
        except sagemaker.exceptions.ClientError as error:
            if "instanceType" not in str(error):
                raise
            # moto's list of hosting types is old too (no ml.g5): same workaround as for notebooks.
            sagemaker.create_endpoint_config(
                EndpointConfigName=config,
                ProductionVariants=[variant | {"InstanceType": MOTO_ENDPOINT_TYPE}],
                **extra,
            )
            backend.endpoint_configs[config].production_variants[0]["InstanceType"] = endpoint.instance_type
        sagemaker.create_endpoint(
            EndpointName=endpoint.name,
            EndpointConfigName=config,
            Tags=_tag_list(endpoint.tags),
        )
        made_endpoint = backend.endpoints[endpoint.name]
        made_endpoint.creation_time = made_endpoint.last_modified_time = _created(world, endpoint.created)


def publish_sagemaker_metrics(world: World, gpus: dict[str, tuple[int, str]], until: datetime) -> None:
    """GPUUtilization per training-job host (summed over its GPUs, as SageMaker does), the CloudWatch agent's
    per-GPU series for notebooks (NotebookInstanceName appended), and endpoint Invocations, GPUUtilization and
    GPUMemoryUtilization per variant."""
    batches: dict[str, list[dict[str, Any]]] = {
        "/aws/sagemaker/TrainingJobs": [],
        "CWAgent": [],
        "AWS/SageMaker": [],
        "/aws/sagemaker/Endpoints": [],
    }
    for job in world.training_jobs:
        count, _ = gpus.get(job.instance_type, (0, "GPU"))
        if job.status != "InProgress" or not count:
            continue
        lookback = JOB_LOOKBACK_MINUTES
        if job.started is not None:
            lookback = max(5, min(lookback, int((world.now - job.started).total_seconds() // 60)))
        metrics = GpuMetrics(pattern=job.gpu_pattern, lookback_minutes=lookback)
        for host in range(1, job.instance_count + 1):
            per_gpu = [gpu_series(metrics, (host - 1) * count + i, world.now, until) for i in range(count)]
            dims = [{"Name": "Host", "Value": f"{job.name}/algo-{host}"}]
            for points in zip(*per_gpu, strict=True):
                total = round(sum(value for _, value in points), 2)
                batches["/aws/sagemaker/TrainingJobs"].append(
                    datum("GPUUtilization", dims, points[0][0], total, "Percent")
                )
    for notebook in world.notebooks:
        count, model = gpus.get(notebook.instance_type, (0, "GPU"))
        if notebook.status != "InService":
            continue
        metrics = GpuMetrics(pattern=notebook.gpu_pattern)
        for index in range(count):
            dims = [
                {"Name": "NotebookInstanceName", "Value": notebook.name},
                {"Name": "index", "Value": str(index)},
                {"Name": "name", "Value": model},
            ]
            for at, value in gpu_series(metrics, index, world.now, until):
                batches["CWAgent"].append(datum("nvidia_smi_utilization_gpu", dims, at, value, "Percent"))
    for endpoint in world.endpoints:
        if not endpoint.invocations_per_hour:
            continue  # no traffic: SageMaker publishes no Invocations datapoints
        start = max(_created(world, endpoint.created), world.now - INVOCATIONS_LOOKBACK)
        minutes = max(5, int((world.now - start).total_seconds() // 60))
        clock_only = GpuMetrics(pattern="idle", lookback_minutes=minutes)
        dims = [
            {"Name": "EndpointName", "Value": endpoint.name},
            {"Name": "VariantName", "Value": endpoint.variant},
        ]
        per_minute = round(endpoint.invocations_per_hour / 60, 4)
        count, _ = gpus.get(endpoint.instance_type, (0, "GPU"))
        # The audit's weeks hourly (history_days), then the sweeps' recent hours minute by minute.
        history = _endpoint_hours(world, endpoint, start)
        calls = [(at, endpoint.invocations_per_hour) for at in history]
        calls += [(at, per_minute) for at, _ in gpu_series(clock_only, 0, world.now, until)]
        for at, invocations in calls:
            batches["AWS/SageMaker"] += _traffic(endpoint, dims, at, invocations)
            # Instance metrics as SageMaker publishes them: 0-100 per GPU, summed over the type's GPUs.
            for name, percent in (
                ("GPUUtilization", endpoint.gpu_percent),
                ("GPUMemoryUtilization", endpoint.gpu_memory_percent),
            ):
                if percent is not None and count:
                    batches["/aws/sagemaker/Endpoints"].append(
                        datum(name, dims, at, round(percent * count, 2), "Percent")
                    )
    for namespace, data in batches.items():
        publish(world.account, world.region, namespace, data)


def _traffic(
    endpoint: Endpoint, dims: list[dict[str, str]], at: datetime, calls: float
) -> list[dict[str, Any]]:
    """An endpoint's traffic as its kind publishes it (AWS/SageMaker): Invocations per endpoint and variant
    (real-time); InvocationsProcessed per endpoint and variant and ApproximateBacklogSize per endpoint, never
    Invocations (asynchronous); Invocations per InferenceComponentName (an endpoint hosting components)."""
    if endpoint.kind == "async":
        backlog = [{"Name": "EndpointName", "Value": endpoint.name}]
        return [
            datum("InvocationsProcessed", dims, at, calls, "None"),
            datum("ApproximateBacklogSize", backlog, at, 0.0, "None"),
        ]
    if endpoint.kind == "inference_components":
        components = endpoint.components()
        share = round(calls / len(components), 4)
        return [
            datum("Invocations", [{"Name": "InferenceComponentName", "Value": c}], at, share, "None")
            for c in components
        ]
    return [datum("Invocations", dims, at, calls, "None")]


def _endpoint_hours(world: World, endpoint: Endpoint, recent: datetime) -> list[datetime]:
    """The whole hours of an endpoint's ``history_days`` before its per-minute series (which starts at
    ``recent``), not before it was created."""
    start = max(_created(world, endpoint.created), world.now - timedelta(days=endpoint.history_days))
    whole = start.replace(minute=0, second=0, microsecond=0)
    first = whole if whole == start else whole + timedelta(hours=1)
    hours = max(0, math.ceil((recent - first).total_seconds() / 3600))
    return [first + timedelta(hours=n) for n in range(hours)]


def _created(world: World, created: datetime | None) -> datetime:
    return created or world.now - ENDPOINT_AGE


def _tag_list(tags: dict[str, str]) -> list[dict[str, str]]:
    return [{"Key": k, "Value": v} for k, v in tags.items()]


def _gpus_of(instance_types: set[str], region: str) -> dict[str, tuple[int, str]]:
    """GPU count and model per (ml.) type from moto's DescribeInstanceTypes; (0, "GPU") where it has none."""
    ec2: Any = clients.client("ec2", region)
    found: dict[str, tuple[int, str]] = {}
    for instance_type in instance_types:
        try:
            described = ec2.describe_instance_types(InstanceTypes=[instance_type.removeprefix("ml.")])
        except ec2.exceptions.ClientError:
            described = {"InstanceTypes": []}
        gpus = (described["InstanceTypes"][0].get("GpuInfo", {}) if described["InstanceTypes"] else {}).get(
            "Gpus", []
        )
        count = sum(g.get("Count", 0) for g in gpus)
        found[instance_type] = (count, gpus[0].get("Name", "GPU") if gpus else "GPU")
    return found


@contextlib.contextmanager
def moto_stop_training_job() -> Iterator[None]:
    """moto has no StopTrainingJob: answer it from moto's own backend, so the adapter's real boto3 call
    (aws/sagemaker.py TrainingJobStopper, behind AwsRemediator.stop) runs unchanged against the embedded AWS.

    SageMaker moves a job to Stopping, then to Stopped once the algorithm had its 120 seconds; here the job in
    moto.sagemaker.models.sagemaker_backends[account][region] is Stopped at once.
    """
    from moto.sagemaker.exceptions import ResourceNotFound, ValidationError
    from moto.sagemaker.models import sagemaker_backends
    from moto.sagemaker.responses import SageMakerResponse

    def stop_training_job(self: Any) -> str:
        name = self._get_param("TrainingJobName")
        job = sagemaker_backends[self.current_account][self.region].training_jobs.get(name)
        if job is None:
            raise ResourceNotFound(message=f"Requested resource not found: training job {name}")
        if job.training_job_status != "InProgress":
            raise ValidationError(
                message=f"The training job {name} is {job.training_job_status}: it cannot be stopped"
            )
        job.training_job_status = job.secondary_status = "Stopped"
        job.training_end_time = job.last_modified_time = clock.now()
        return "{}"

    with mock.patch.object(SageMakerResponse, "stop_training_job", stop_training_job, create=True):
        yield


def _reset_process_caches() -> None:
    """Forget everything a previous local stack left in this process (clients, settings, secrets)."""
    import aws_lambda_powertools.utilities.parameters.base as parameters_base

    from costguard.aws import buckets, organization
    from costguard.aws.price_list import live_price
    from costguard.notify.delivery import webhook_client
    from costguard.runtime import runtime
    from costguard.settings import get_settings

    clients.reset()
    organization.reset()  # the organization's accounts, read from the previous embedded AWS
    buckets.reset()  # the buckets' regions, likewise
    get_settings.cache_clear()
    runtime.cache_clear()
    webhook_client.cache_clear()
    live_price.cache_clear()
    parameters_base.DEFAULT_PROVIDERS.clear()  # type: ignore[attr-defined]


@contextlib.contextmanager
def patched_environ(values: dict[str, str]) -> Iterator[None]:
    saved = dict(os.environ)
    os.environ.update(values)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    with contextlib.redirect_stdout(io.StringIO()):
        yield


class _CurrentStderr(io.TextIOBase):
    """Whatever sys.stderr is at the time of writing (pytest and the CLI swap it)."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


def route_logs_to_stderr() -> None:
    """Lambda logs go to stdout; locally they go to stderr so the command's own output stays clean."""
    for handler in logging.getLogger(os.environ.get("POWERTOOLS_SERVICE_NAME", "costguard")).handlers:
        if isinstance(handler, logging.StreamHandler):
            handler.setStream(_CurrentStderr())
