"""DynamoDB's key-size limits on every call of the embedded AWS, as DynamoDB enforces them.

DynamoDB refuses a partition key over 2,048 bytes and a sort key over 1,024 bytes on every read and write
(GetItem, BatchGetItem, UpdateItem, DeleteItem, Query, the transactions...) with a ValidationException; moto
checks them on PutItem only, so code that reads or updates by an over-long key passes on moto and fails on AWS.
``key_limits()`` adds the check to moto's DynamoDB for every other operation, with moto's own refusal
(``HashKeyTooLong``, ``RangeKeyTooLong``: the same error code and message as its PutItem's). A request is checked
before moto does anything with it, so a refused batch or transaction changes nothing, as on AWS.

The local stack runs under it (local/stack.py), and so does every test (tests/conftest.py).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import threading
from collections.abc import Callable, Iterator
from typing import Any

from moto.dynamodb.exceptions import HashKeyTooLong, RangeKeyTooLong, ResourceNotFoundException
from moto.dynamodb.limits import HASH_KEY_MAX_LENGTH, RANGE_KEY_MAX_LENGTH
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.dynamo_type import DynamoType
from moto.dynamodb.responses import DynamoHandler

# (table name, the item or key) pairs of each operation's request body.
Keys = list[tuple[str, dict[str, Any]]]


def _one(body: dict[str, Any], field: str) -> Keys:
    return [(body.get("TableName", ""), body.get(field) or {})]


def _batch_get(body: dict[str, Any]) -> Keys:
    return [
        (table, key) for table, asked in (body.get("RequestItems") or {}).items() for key in asked["Keys"]
    ]


def _batch_write(body: dict[str, Any]) -> Keys:
    found: Keys = []
    for table, writes in (body.get("RequestItems") or {}).items():
        for write in writes:
            if "PutRequest" in write:
                found.append((table, write["PutRequest"].get("Item") or {}))
            if "DeleteRequest" in write:
                found.append((table, write["DeleteRequest"].get("Key") or {}))
    return found


def _transact(body: dict[str, Any]) -> Keys:
    found: Keys = []
    for entry in body.get("TransactItems") or []:
        for op, request in entry.items():
            found.append((request.get("TableName", ""), request.get("Item" if op == "Put" else "Key") or {}))
    return found


_CHECKED: dict[str, Callable[[dict[str, Any]], Keys]] = {
    "get_item": lambda body: _one(body, "Key"),
    "put_item": lambda body: _one(body, "Item"),
    "update_item": lambda body: _one(body, "Key"),
    "delete_item": lambda body: _one(body, "Key"),
    "batch_get_item": _batch_get,
    "batch_write_item": _batch_write,
    "transact_get_items": _transact,
    "transact_write_items": _transact,
}


def check_key(hash_value: Any, range_value: Any = None) -> None:
    """Refuse a partition key over 2,048 bytes or a sort key over 1,024 bytes, as DynamoDB does."""
    if hash_value and DynamoType(hash_value).size() > HASH_KEY_MAX_LENGTH:
        raise HashKeyTooLong
    if range_value and DynamoType(range_value).size() > RANGE_KEY_MAX_LENGTH:
        raise RangeKeyTooLong


def _check_request(handler: DynamoHandler, keys: Keys) -> None:
    backend = handler.dynamodb_backend
    for name, key in keys:
        try:
            table = backend.get_table(name)
        except ResourceNotFoundException:  # moto's own answer says so
            continue
        range_value = key.get(table.range_key_attr) if table.range_key_attr else None
        check_key(key.get(table.hash_key_attr), range_value)


def _guarded(action: str, original: Callable[..., Any]) -> Callable[..., Any]:
    keys_of = _CHECKED[action]

    @functools.wraps(original)
    def checked(self: DynamoHandler) -> Any:
        _check_request(self, keys_of(self.body))
        return original(self)

    return checked


def _guarded_query(original: Callable[..., Any]) -> Callable[..., Any]:
    """Query names its partition key in an expression: checked once moto has parsed it (before any read)."""
    signature = inspect.signature(original)

    @functools.wraps(original)
    def checked(*args: Any, **kwargs: Any) -> Any:
        asked = signature.bind(*args, **kwargs).arguments
        check_key(asked.get("hash_key_dict"))
        for _, value in asked.get("hash_key_conditions") or []:
            check_key(value)
        for value in asked.get("range_value_dicts") or []:
            check_key(None, value)
        for _, _, values in asked.get("range_key_conditions") or []:
            for value in values:
                check_key(None, value)
        return original(*args, **kwargs)

    return checked


_lock = threading.Lock()
_depth = 0
_originals: dict[str, Any] = {}


@contextlib.contextmanager
def key_limits() -> Iterator[None]:
    """moto's DynamoDB refusing over-long keys on every operation while inside (re-entrant: nested uses share
    one installation, removed when the outermost ends)."""
    global _depth
    with _lock:
        if _depth == 0:
            for action in _CHECKED:
                _originals[action] = DynamoHandler.__dict__[action]
                setattr(DynamoHandler, action, _guarded(action, _originals[action]))
            _originals["query"] = DynamoDBBackend.__dict__["query"]
            DynamoDBBackend.query = _guarded_query(_originals["query"])  # type: ignore[method-assign]
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                for action in _CHECKED:
                    setattr(DynamoHandler, action, _originals[action])
                DynamoDBBackend.query = _originals["query"]  # type: ignore[method-assign]
                _originals.clear()
