"""The Distributed Map's ResultWriter as AWS documents it, where moto's writes only an empty manifest.

moto executes an S3 ``ItemReader`` (a JSON array read with GetObject) as Step Functions does, but its
``ResultWriter`` writes a manifest that lists no result file and drops the children's outputs. While the local
audit runs, the writer is this one instead: the children's outputs go, as AWS writes them, to
``<Prefix>/<map run id>/SUCCEEDED_0.json`` (a JSON array of records whose ``Input`` and ``Output`` are JSON
strings), then ``manifest.json`` names that file with its size, and the Map's output is the MapRunArn and the
manifest's address (``ResultWriterDetails``). moto hands the writer the outputs only, in item order: a record's
``Input`` is rebuilt from its output's account and region (every audit outcome names them). A failed child fails
moto's whole map run, so only SUCCEEDED records arise here; tests/contract/test_map_results.py holds the report's
reading of FAILED and PENDING records to AWS's documented shape.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any
from unittest import mock

_WRITER = "moto.stepfunctions.parser.asl.component.state.exec.state_map.result_writer.resource_eval.resource_eval_s3"


def result_files(
    bucket: str, prefix: str, map_run_arn: str, outputs: list[Any]
) -> tuple[list[tuple[str, bytes]], dict[str, Any]]:
    """The objects AWS would write for these SUCCEEDED children, the manifest last, and the Map's output."""
    run_id = map_run_arn.rsplit(":", 1)[-1]
    base = f"{prefix.rstrip('/')}/{run_id}" if prefix else run_id
    records = [_record(map_run_arn, n, output) for n, output in enumerate(outputs)]
    body = json.dumps(records, default=str).encode()
    key = f"{base}/SUCCEEDED_0.json"
    manifest = {
        "DestinationBucket": bucket,
        "MapRunArn": map_run_arn,
        "ResultFiles": {"FAILED": [], "PENDING": [], "SUCCEEDED": [{"Key": key, "Size": len(body)}]},
    }
    manifest_key = f"{base}/manifest.json"
    objects = [(key, body), (manifest_key, json.dumps(manifest).encode())]
    return objects, {"MapRunArn": map_run_arn, "ResultWriterDetails": {"Bucket": bucket, "Key": manifest_key}}


def _record(map_run_arn: str, index: int, output: Any) -> dict[str, Any]:
    item = (
        {k: output.get(k) for k in ("account", "account_name", "region")} if isinstance(output, dict) else {}
    )
    execution = map_run_arn.replace(":mapRun:", ":execution:", 1) + f":{index}"
    return {
        "ExecutionArn": execution,
        "Name": str(index),
        "Status": "SUCCEEDED",
        "Input": json.dumps(item),
        "InputDetails": {"Included": True},
        "Output": json.dumps(output, default=str),
        "OutputDetails": {"Included": True},
    }


def _put_results(env: Any, resource_runtime_part: Any, state_credentials: Any) -> None:
    """moto's ``_handle_put_object``, writing what AWS writes."""
    from moto.stepfunctions.parser.asl.utils.boto_client import boto_client_for

    parameters = env.stack.pop()
    outputs = env.stack.pop()
    s3: Any = boto_client_for(
        region=resource_runtime_part.region, service="s3", state_credentials=state_credentials
    )
    map_run_record = env.map_run_record_pool_manager.get_all().pop()
    objects, details = result_files(
        parameters["Bucket"], parameters.get("Prefix", ""), map_run_record.map_run_arn, list(outputs)
    )
    for key, body in objects:
        s3.put_object(Bucket=parameters["Bucket"], Key=key, Body=body)
    env.stack.append(details)


@contextlib.contextmanager
def documented_result_writer() -> Iterator[None]:
    """While the context lasts, the Map's ResultWriter writes its children's outputs as AWS does."""
    with mock.patch(f"{_WRITER}.ResourceEvalS3._handle_put_object", staticmethod(_put_results)):
        yield
