"""Batched reads and writes of the state table's items (BatchGetItem, BatchWriteItem): the one retry loop of
every store that batches.

DynamoDB may answer only part of a batch when the table throttles (``UnprocessedKeys``, ``UnprocessedItems``).
The rest is asked again after a growing wait (0.1 s, 0.2 s, 0.4 s, ...), up to ``attempts`` calls per chunk of
keys or writes. What is still unprocessed after that is logged as a warning with its count and left out: a read
returns the items it got (the caller takes an item it did not get as not stored), a write returns how many items
it did not write. An error of a call itself (a refused request, botocore's own retries spent) is raised as it
comes.

The callers declare the IAM actions these calls need (dynamodb:BatchGetItem, dynamodb:BatchWriteItem) in their
own PERMISSIONS.

Every id the state table is keyed by that holds a name AWS or Kubernetes chose (a resource key, a budget's name, a
workload's, a job family's) is built with ``table_id``: DynamoDB refuses a partition key over 2,048 bytes on every
read and write, and a Kubernetes ownerReference name, say, is checked only for being non-empty. A key that fits is
kept as it is, byte for byte (items stored before are found); a longer one is kept under its SHA-256.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from costguard.observability import logger

GET_CHUNK = 100  # BatchGetItem's limit of keys a call
WRITE_CHUNK = 25  # BatchWriteItem's limit of writes a call
ATTEMPTS = 5  # calls per chunk: the first, and retries of what is left unprocessed
BACKOFF_SECONDS = 0.05  # the wait before attempt n (n >= 1) is BACKOFF_SECONDS * 2**n

Request = dict[str, Any]

# DynamoDB's limit on a partition key is 2,048 bytes; a key part up to half that is kept as it is, so a prefix and
# the rest of an id have room.
MAX_KEY_BYTES = 1024


def table_id(prefix: str, key: str) -> str:
    """The state table's id of ``key`` under ``prefix``: ``prefix + key``, or ``prefix + "sha256:<hex>"`` when
    ``key`` is over MAX_KEY_BYTES in UTF-8. The same key always gives the same id: read and write with it."""
    encoded = key.encode("utf-8", "surrogatepass")
    if len(encoded) <= MAX_KEY_BYTES:
        return prefix + key
    return f"{prefix}sha256:{hashlib.sha256(encoded).hexdigest()}"


def whole_id(item_id: str) -> str:
    """``table_id`` of an id already joined (``<prefix>#<rest>``): the part after the first ``#`` is the key."""
    prefix, mark, rest = item_id.partition("#")
    return table_id(prefix + mark, rest) if mark else table_id("", item_id)


def backoff(attempt: int) -> float:
    """The wait before the call of this attempt (0 for the first)."""
    return BACKOFF_SECONDS * 2**attempt if attempt else 0.0


def _until_processed(call: Callable[[Request], Request], request: Request, attempts: int) -> Request:
    """Calls ``call`` on ``request``, then on what each call leaves unprocessed (``call`` returns it), up to
    ``attempts`` calls; returns what is still unprocessed (empty when all was processed)."""
    for attempt in range(attempts):
        if attempt:
            time.sleep(backoff(attempt))  # unprocessed: the table is throttling
        request = call(request)
        if not request:
            break
    return request


def _get_request(ids: Sequence[str], consistent: bool, attributes: Sequence[str]) -> Request:
    request: Request = {"Keys": [{"id": {"S": i}} for i in ids]}
    if consistent:
        request["ConsistentRead"] = True
    if attributes:
        names = {f"#p{n}": name for n, name in enumerate(attributes)}
        request["ProjectionExpression"] = ", ".join(names)
        request["ExpressionAttributeNames"] = names
    return request


def batch_get(
    dynamodb: Any,
    table: str,
    ids: Iterable[str],
    *,
    consistent: bool = False,
    attributes: Sequence[str] = (),
    attempts: int = ATTEMPTS,
    chunk: int = GET_CHUNK,
) -> list[dict[str, Any]]:
    """The stored items of these ids (the table's key attribute ``id``, a string), read ``chunk`` keys a call;
    an id asked twice is asked once. ``consistent`` asks for strongly consistent reads, ``attributes`` for
    these attributes only. Keys still unprocessed after ``attempts`` calls are left out, with a warning."""
    unique = list(dict.fromkeys(ids))
    items: list[dict[str, Any]] = []

    def call(request: Request) -> Request:
        answer = dynamodb.batch_get_item(RequestItems=request)
        items.extend(answer.get("Responses", {}).get(table, []))
        return answer.get("UnprocessedKeys") or {}

    unprocessed = 0
    for start in range(0, len(unique), chunk):
        request = {table: _get_request(unique[start : start + chunk], consistent, attributes)}
        left = _until_processed(call, request, attempts)
        unprocessed += len(left.get(table, {}).get("Keys", []))
    if unprocessed:
        logger.warning(
            "DynamoDB left keys unprocessed: read as not stored",
            extra={"table": table, "keys": len(unique), "unprocessed": unprocessed, "attempts": attempts},
        )
    return items


def batch_write(
    dynamodb: Any,
    table: str,
    writes: Sequence[Request],
    *,
    attempts: int = ATTEMPTS,
    chunk: int = WRITE_CHUNK,
) -> int:
    """Writes these requests (each ``{"PutRequest": ...}`` or ``{"DeleteRequest": ...}``), ``chunk`` a call;
    returns how many are still unprocessed after ``attempts`` calls (not written, with a warning)."""

    def call(request: Request) -> Request:
        return dynamodb.batch_write_item(RequestItems=request).get("UnprocessedItems") or {}

    unprocessed = 0
    for start in range(0, len(writes), chunk):
        left = _until_processed(call, {table: list(writes[start : start + chunk])}, attempts)
        unprocessed += len(left.get(table, []))
    if unprocessed:
        logger.warning(
            "DynamoDB left writes unprocessed: not written",
            extra={"table": table, "writes": len(writes), "unprocessed": unprocessed, "attempts": attempts},
        )
    return unprocessed
