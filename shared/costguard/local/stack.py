"""The deployed stack, played in-process on an embedded AWS (moto) and a local Slack sink."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import logging
import os
import sys
import uuid
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from types import ModuleType
from typing import Any

from moto import mock_aws

from costguard import clock
from costguard.aws import clients
from costguard.local.fast_metrics import indexed_metrics
from costguard.local.sink import SlackSink
from costguard.local.template import Function, Template, resolve
from costguard.local.world import World, gpu_series

PROJECT_ROOT = Path(__file__).resolve().parents[3]
DEFAULT_TEMPLATE = PROJECT_ROOT / "template.yaml"

# Physical names of the stack's resources in the embedded AWS.
TABLE = "costguard-state"
QUEUES = {  # the dead-letter queue first: the decisions queue's redrive policy names it
    "DecisionsDeadLetterQueue": "costguard-decisions-dlq",
    "DecisionsQueue": "costguard-decisions",
    "FailedEventsQueue": "costguard-failed-events",
}
SECRET = "costguard/slack-webhook"  # noqa: S105 (a secret name, not a secret)
MAX_RECEIVE_COUNT = 5


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
    ) -> None:
        self.world = world
        self.until = until  # metric series run on to here: the clock may move past the world's now
        self.template = template or Template.load(DEFAULT_TEMPLATE)
        self.mode = mode
        self.sink = sink or SlackSink()
        self.routes = routes or {}
        self.overrides = overrides or {}
        self.urls: dict[str, str] = {}
        self.consumed: list[str] = []  # bodies the queue consumer accepted, oldest first
        self._modules: dict[str, ModuleType] = {}
        self._exit = contextlib.ExitStack()

    # -- lifecycle -------------------------------------------------------------------------
    def __enter__(self) -> LocalStack:
        self._exit.enter_context(warnings.catch_warnings())
        warnings.filterwarnings("ignore", message="No application metrics to publish")
        self._exit.enter_context(_patched_environ(self._base_environment()))
        if self.sink._server is None:
            self._exit.enter_context(self.sink)
        self._exit.enter_context(mock_aws())
        self._exit.enter_context(indexed_metrics())
        self._exit.callback(clock.freeze, None)
        _reset_process_caches()
        clients.calls.clear()
        self._create_resources()
        os.environ.update(self._function_environment())
        from costguard.observability import logger

        logger.setLevel(os.environ.get("POWERTOOLS_LOG_LEVEL", "WARNING"))
        route_logs_to_stderr()
        seed_world(self.world, self.until)
        clock.freeze(self.world.now)
        clients.calls.clear()
        return self

    def __exit__(self, *_: object) -> None:
        self._exit.close()
        _reset_process_caches()

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
        }

    def _create_resources(self) -> None:
        dynamodb = clients.client("dynamodb")
        dynamodb.create_table(
            TableName=TABLE,
            AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
            KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
            BillingMode="PAY_PER_REQUEST",
        )
        sqs: Any = clients.client("sqs")
        for logical, name in QUEUES.items():
            attributes = {"VisibilityTimeout": "0"}
            if logical == "DecisionsQueue":
                dlq = self.urls["DecisionsDeadLetterQueue"]
                dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"][
                    "QueueArn"
                ]
                attributes["RedrivePolicy"] = json.dumps(
                    {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": MAX_RECEIVE_COUNT}
                )
            self.urls[logical] = sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]
        secret = json.dumps({"default": self.sink.url, "routes": self.routes})
        self.urls["SlackWebhookSecret"] = clients.client("secretsmanager").create_secret(
            Name=SECRET, SecretString=secret
        )["ARN"]

    def _function_environment(self) -> dict[str, str]:
        refs = self.template.parameter_defaults()
        if self.mode:
            refs["Mode"] = self.mode
        refs.update(
            {
                "StateTable": TABLE,
                "DecisionsQueue": self.urls["DecisionsQueue"],
                "FailedEventsQueue": self.urls["FailedEventsQueue"],
                "SlackWebhookSecret": self.urls["SlackWebhookSecret"],
                "SlackWebhookSecretArn": "",
            }
        )
        conditions = {"CreateSlackSecret": True}
        env = {k: resolve(v, refs, conditions) for k, v in self.template.global_environment().items()}
        env.update(self.overrides)
        return env

    # -- running functions -----------------------------------------------------------------
    def module(self, function: Function) -> ModuleType:
        if function.logical_id not in self._modules:
            name = f"costguard_fn_{function.logical_id}_{uuid.uuid4().hex[:8]}"
            spec = importlib.util.spec_from_file_location(name, function.module_path)
            assert spec and spec.loader, f"cannot load {function.module_path}"
            module = importlib.util.module_from_spec(spec)
            with _quiet():
                spec.loader.exec_module(module)
            self._modules[function.logical_id] = module
        return self._modules[function.logical_id]

    def invoke(self, logical_id: str, event: Any) -> Invocation:
        function = self.template.functions()[logical_id]
        handler: Callable[[Any, Any], Any] = getattr(self.module(function), function.handler_name)
        buffer = io.StringIO()
        with contextlib.redirect_stdout(buffer):
            result = handler(event, LambdaContext(function_name=logical_id))
        return Invocation(logical_id, result, buffer.getvalue())

    def drain(self, queue_logical_id: str = "DecisionsQueue", max_rounds: int = 50) -> list[Invocation]:
        """Play Lambda's SQS event source mapping until the queue is empty (or only failures remain)."""
        consumer = self.template.queue_consumer(queue_logical_id)
        assert consumer, f"no function consumes {queue_logical_id}"
        url = self.urls[queue_logical_id]
        sqs: Any = clients.client("sqs")
        invocations = []
        for _ in range(max_rounds):
            received = sqs.receive_message(
                QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"], VisibilityTimeout=0
            ).get("Messages", [])
            if not received:
                break
            event = {"Records": [_sqs_record(m, url) for m in received]}
            try:
                invocation = self.invoke(consumer.logical_id, event)
            except Exception as error:  # Lambda returns the whole batch to the queue
                invocations.append(Invocation(consumer.logical_id, {"error": str(error)}, ""))
                failed = {m["MessageId"] for m in received}
            else:
                invocations.append(invocation)
                failed = {f["itemIdentifier"] for f in (invocation.result or {}).get("batchItemFailures", [])}
            done = [m for m in received if m["MessageId"] not in failed]
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

    def queue_depth(self, queue_logical_id: str) -> int:
        attributes = clients.sqs().get_queue_attributes(
            QueueUrl=self.urls[queue_logical_id], AttributeNames=["ApproximateNumberOfMessages"]
        )["Attributes"]
        return int(attributes["ApproximateNumberOfMessages"])


def _sqs_record(message: dict[str, Any], url: str) -> dict[str, Any]:
    return {
        "messageId": message["MessageId"],
        "receiptHandle": message["ReceiptHandle"],
        "body": message["Body"],
        "attributes": message.get("Attributes", {}),
        "messageAttributes": {},
        "md5OfBody": message["MD5OfBody"],
        "eventSource": "aws:sqs",
        "eventSourceARN": ":".join(
            ["arn:aws:sqs", os.environ["AWS_REGION"], os.environ["MOTO_ACCOUNT_ID"], url.rsplit("/", 1)[-1]]
        ),
        "awsRegion": os.environ["AWS_REGION"],
    }


def seed_world(world: World, until: datetime | None = None) -> None:
    """Create the world's instances (with the world's own ids) and publish their GPU metrics."""
    if not world.instances:
        return
    from moto.ec2.models import ec2_backends  # the embedded AWS only

    ec2: Any = clients.client("ec2", world.region)
    backend = ec2_backends[world.account][world.region]
    image = ec2.describe_images()["Images"][0]["ImageId"]
    gpu_info: dict[str, dict[str, Any]] = {}
    for spec in world.instances:
        made = ec2.run_instances(ImageId=image, InstanceType=spec.type, MinCount=1, MaxCount=1)
        instance = backend.get_instance_by_id(made["Instances"][0]["InstanceId"])
        assert instance is not None
        instance.id = spec.id  # moto assigns random ids; the world's events name real-looking ones
        if spec.launched:
            instance.launch_time = spec.launched
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


def publish_metrics(world: World, gpu_info: dict[str, dict[str, Any]], until: datetime) -> None:
    """The CloudWatch agent's per-GPU series, and EC2's CPU and network series, for running instances."""
    cloudwatch: Any = clients.client("cloudwatch", world.region)
    batches: dict[str, list[dict[str, Any]]] = {"CWAgent": [], "AWS/EC2": []}
    for spec in world.instances:
        gpus = gpu_info.get(spec.type, {}).get("Gpus", [])
        count = sum(g.get("Count", 0) for g in gpus)
        model = gpus[0].get("Name", "GPU") if gpus else "GPU"
        if spec.state != "running":
            continue
        for index in range(count):
            dims = [
                {"Name": "InstanceId", "Value": spec.id},
                {"Name": "index", "Value": str(index)},
                {"Name": "name", "Value": model},
            ]
            for at, value in gpu_series(spec.gpu_metrics, index, world.now, until):
                batches["CWAgent"].append(_datum("nvidia_smi_utilization_gpu", dims, at, value, "Percent"))
        ec2_dims = [{"Name": "InstanceId", "Value": spec.id}]
        clock_only = spec.gpu_metrics.model_copy(update={"pattern": "idle", "gpus": []})
        for at, _ in gpu_series(clock_only, 0, world.now, until):
            batches["AWS/EC2"].append(_datum("CPUUtilization", ec2_dims, at, spec.cpu_percent, "Percent"))
            batches["AWS/EC2"].append(
                _datum("NetworkIn", ec2_dims, at, spec.network_in_mb_per_minute * 1e6, "Bytes")
            )
    for namespace, data in batches.items():
        for start in range(0, len(data), 1000):
            cloudwatch.put_metric_data(Namespace=namespace, MetricData=data[start : start + 1000])


def _datum(name: str, dims: list[dict[str, str]], at: datetime, value: float, unit: str) -> dict[str, Any]:
    return {"MetricName": name, "Dimensions": dims, "Timestamp": at, "Value": value, "Unit": unit}


def _reset_process_caches() -> None:
    """Forget everything a previous local stack left in this process (clients, settings, secrets)."""
    import aws_lambda_powertools.utilities.parameters.base as parameters_base

    from costguard.notify.delivery import webhook_client
    from costguard.pricing.live import live_price
    from costguard.runtime import runtime
    from costguard.settings import get_settings

    clients.reset()
    get_settings.cache_clear()
    runtime.cache_clear()
    webhook_client.cache_clear()
    live_price.cache_clear()
    parameters_base.DEFAULT_PROVIDERS.clear()  # type: ignore[attr-defined]


@contextlib.contextmanager
def _patched_environ(values: dict[str, str]) -> Iterator[None]:
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
