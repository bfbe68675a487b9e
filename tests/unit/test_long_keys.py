"""Issue 39: every state key costguard builds from a name AWS or Kubernetes accepts fits DynamoDB's key limit.

The embedded DynamoDB (moto) refuses a partition key over 2,048 bytes on every call, as DynamoDB does
(costguard/local/dynamo_limits.py, installed for every test by tests/conftest.py); moto alone checks PutItem
only. Each key family round-trips a 10,000-character resource id under it: written, then found by the same key.
A key that fits is kept byte for byte as before, so items already stored are still found.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta

import pytest
from botocore.exceptions import ClientError

from costguard.aws import clients
from costguard.aws.dynamo import MAX_KEY_BYTES, table_id, whole_id
from costguard.model import Resource, ResourceKind

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
ACCOUNT, REGION = "123456789012", "us-east-1"
LONG_NAME = "x" * 10_000  # a Kubernetes ownerReference name is checked only for being non-empty
LONG_KEY = f"{ACCOUNT}/{REGION}/eks_workload/ml-platform/serving/Deployment/{LONG_NAME}"
LIMIT = "Size of hashkey has exceeded the maximum size limit of"


def long_resource(kind: ResourceKind = ResourceKind.EKS_WORKLOAD) -> Resource:
    return Resource(
        kind=kind, id=f"ml-platform/serving/Deployment/{LONG_NAME}", account=ACCOUNT, region=REGION
    )


def stored_ids(table: str) -> list[str]:
    return [item["id"]["S"] for item in clients.client("dynamodb").scan(TableName=table)["Items"]]


def assert_ids_fit(table: str) -> None:
    ids = stored_ids(table)
    assert ids
    assert all(len(i.encode()) <= 2048 for i in ids)


# -- the key function ---------------------------------------------------------------------------------------------


def test_a_key_that_fits_is_kept_byte_for_byte() -> None:
    assert table_id("mute#", "123456789012/us-east-1/ec2_instance/i-0abc|gpu_idle") == (
        "mute#123456789012/us-east-1/ec2_instance/i-0abc|gpu_idle"
    )
    at_limit = "é" * (MAX_KEY_BYTES // 2)  # 1,024 bytes in UTF-8
    assert table_id("p#", at_limit) == "p#" + at_limit


def test_a_longer_key_is_kept_under_its_sha256_counted_in_bytes() -> None:
    over = "é" * (MAX_KEY_BYTES // 2 + 1)  # 513 characters, 1,026 bytes
    assert table_id("p#", over) == f"p#sha256:{hashlib.sha256(over.encode()).hexdigest()}"
    assert table_id("p#", LONG_KEY) == table_id("p#", LONG_KEY)  # the same key, the same id
    assert table_id("p#", LONG_KEY) != table_id("p#", LONG_KEY + "y")


def test_a_whole_id_keeps_its_prefix() -> None:
    assert whole_id("spot#123456789012#us-east-1#train") == "spot#123456789012#us-east-1#train"
    rest = f"{ACCOUNT}#{REGION}#{LONG_NAME}"
    assert whole_id(f"spot#{rest}") == table_id("spot#", rest)
    assert whole_id(LONG_NAME) == table_id("", LONG_NAME)


def test_table_id_is_still_importable_from_act_shadow() -> None:
    from costguard.act import shadow

    assert shadow.table_id is table_id


# -- the stand-in holds every call to DynamoDB's limit -------------------------------------------------------------


@pytest.mark.parametrize(
    "call",
    [
        lambda table, key: clients.client("dynamodb").get_item(TableName=table, Key=key),
        lambda table, key: clients.client("dynamodb").update_item(
            TableName=table,
            Key=key,
            UpdateExpression="SET mark = :m",
            ExpressionAttributeValues={":m": {"S": "x"}},
        ),
        lambda table, key: clients.client("dynamodb").delete_item(TableName=table, Key=key),
        lambda table, key: clients.client("dynamodb").batch_get_item(
            RequestItems={table: {"Keys": [{"id": {"S": "short"}}, key]}}
        ),
        lambda table, key: clients.client("dynamodb").batch_write_item(
            RequestItems={table: [{"DeleteRequest": {"Key": key}}]}
        ),
        lambda table, key: clients.client("dynamodb").query(
            TableName=table,
            KeyConditionExpression="id = :id",
            ExpressionAttributeValues={":id": key["id"]},
        ),
        lambda table, key: clients.client("dynamodb").transact_write_items(
            TransactItems=[
                {
                    "Update": {
                        "TableName": table,
                        "Key": key,
                        "UpdateExpression": "SET mark = :m",
                        "ExpressionAttributeValues": {":m": {"S": "x"}},
                    }
                }
            ]
        ),
    ],
    ids=[
        "GetItem",
        "UpdateItem",
        "DeleteItem",
        "BatchGetItem",
        "BatchWriteItem",
        "Query",
        "TransactWriteItems",
    ],
)
def test_the_stand_in_refuses_a_2049_byte_key_as_dynamodb_does(state_table: str, call) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ClientError) as refused:
        call(state_table, {"id": {"S": "k" * 2049}})
    assert refused.value.response["Error"]["Code"] == "ValidationException"
    assert LIMIT in refused.value.response["Error"]["Message"]
    assert stored_ids(state_table) == []  # nothing was written


def test_the_stand_in_takes_a_2048_byte_key(state_table: str) -> None:
    dynamodb = clients.client("dynamodb")
    key = {"id": {"S": "é" * 1024}}  # 2,048 bytes
    dynamodb.update_item(
        TableName=state_table,
        Key=key,
        UpdateExpression="SET mark = :m",
        ExpressionAttributeValues={":m": {"S": "x"}},
    )
    assert dynamodb.get_item(TableName=state_table, Key=key)["Item"]["mark"] == {"S": "x"}


# -- every key family round-trips a 10,000-character resource id ---------------------------------------------------


def test_shadow_marks(state_table: str) -> None:
    from costguard.act.shadow import DynamoShadowMarks

    resource = long_resource()
    DynamoShadowMarks(state_table).mark(resource, NOW)
    found = DynamoShadowMarks(state_table).read([resource.key], NOW + timedelta(minutes=20))
    assert found[resource.key].mark is not None
    DynamoShadowMarks(state_table).stop(resource, NOW + timedelta(minutes=20))
    assert (
        DynamoShadowMarks(state_table).read([resource.key], NOW + timedelta(minutes=25))[resource.key].stopped
    )
    assert_ids_fit(state_table)
    DynamoShadowMarks(state_table).unmark(resource)
    assert stored_ids(state_table) == []


def test_mark_records(state_table: str) -> None:
    from costguard.act.marks import DynamoMarkRecords

    resource = long_resource(ResourceKind.EC2_INSTANCE)
    DynamoMarkRecords(state_table).mark(resource, NOW)
    assert resource.key in DynamoMarkRecords(state_table).read([resource.key], NOW + timedelta(minutes=5))
    assert_ids_fit(state_table)
    DynamoMarkRecords(state_table).unmark(resource)
    assert stored_ids(state_table) == []


def test_arming_records(state_table: str) -> None:
    from costguard.act.arming import DynamoArmingRecords, FirstSeen

    records = DynamoArmingRecords(state_table)
    records.keep(LONG_KEY, FirstSeen(tags={"costguard:auto-stop": "true"}, seen=NOW), NOW)
    assert records.read([LONG_KEY])[LONG_KEY].tags == {"costguard:auto-stop": "true"}
    assert_ids_fit(state_table)


def test_mutes(state_table: str) -> None:
    from costguard.interact import state
    from costguard.notify.mutes import DynamoMutes

    state.mute(state_table, LONG_KEY, "pod_gpu_idle", NOW + timedelta(days=1), by="U0DANA0001")
    assert state.is_muted(state_table, LONG_KEY, "pod_gpu_idle", NOW)
    pairs = [(LONG_KEY, "pod_gpu_idle"), (LONG_KEY, "gpu_idle")]
    assert DynamoMutes(state_table).muted(pairs, NOW) == {(LONG_KEY, "pod_gpu_idle")}
    assert_ids_fit(state_table)


def test_a_mute_stored_before_is_still_found(state_table: str) -> None:
    """A short key's id is what it always was: a mute written by an earlier version is read by this one."""
    from costguard.interact import state

    key = f"{ACCOUNT}/{REGION}/ec2_instance/i-0abc"
    clients.client("dynamodb").put_item(
        TableName=state_table,
        Item={
            "id": {"S": f"mute#{key}|gpu_idle"},
            "until": {"S": (NOW + timedelta(days=1)).isoformat()},
            "by": {"S": "U0DANA0001"},
            "expiration": {"N": str(int((NOW + timedelta(days=1)).timestamp()))},
        },
    )
    assert state.is_muted(state_table, key, "gpu_idle", NOW)


def test_repeat_gate(state_table: str) -> None:
    from costguard.notify.dedupe import DynamoRepeatGate, Sighting

    gate, key = DynamoRepeatGate(state_table), f"{LONG_KEY}|pod_gpu_idle|mark"
    assert gate.sighting(key, NOW, timedelta(hours=4)) is Sighting.NEW
    assert gate.sighting(key, NOW + timedelta(minutes=5), timedelta(hours=4)) is Sighting.REPEAT
    assert_ids_fit(state_table)


def test_offers(state_table: str) -> None:
    from costguard.interact.offers import DynamoOffers, record_offers

    button = {"type": "button", "action_id": "costguard:stop", "value": f"pod_gpu_idle|{LONG_KEY}"}
    message = {"blocks": [{"type": "actions", "elements": [button]}]}
    record_offers(state_table, "C0123456789", "1700000000.000100", [], NOW, message=message)
    offer = DynamoOffers(state_table).offered("C0123456789", LONG_KEY, "pod_gpu_idle", NOW)
    assert offer is not None and offer.offers("costguard:stop", None)
    assert_ids_fit(state_table)


def test_conversations(state_table: str) -> None:
    from costguard.notify.conversation import DynamoConversationStore, destination_id

    webhook = "https://hooks.slack.com/services/T0000/B0000/longkeysSECRETtoken"
    store, where = DynamoConversationStore(state_table), destination_id(webhook)
    store.open(
        where,
        LONG_KEY,
        channel="C0123456789",
        post="post-1",
        ts="1700000000.000001",
        grouped=False,
        told=[],
        now=NOW,
    )
    store.add_told(where, LONG_KEY, ["notice-1"], NOW)
    conversation = store.get_many(webhook, [LONG_KEY])[LONG_KEY]
    assert (conversation.ts, sorted(conversation.told)) == ("1700000000.000001", ["notice-1"])
    assert store.begin(where, LONG_KEY, NOW.timestamp() + 60, NOW).won
    store.finish(where, LONG_KEY, "1700000000.000002")
    assert_ids_fit(state_table)


def test_idle_histories_and_pools(state_table: str) -> None:
    from costguard.aws.idle_history import DynamoIdleHistories, history_key, prior_key
    from costguard.detect.adaptive import IdleHistory
    from costguard.detect.idle_priors import Pool

    history, pool = history_key(ACCOUNT, REGION, LONG_NAME), prior_key(ACCOUNT, REGION, LONG_NAME)
    assert history_key(ACCOUNT, REGION, "i-0abc") == f"idle-history#{ACCOUNT}/{REGION}/i-0abc"  # as before
    idle = IdleHistory(idle_since=NOW)
    DynamoIdleHistories(state_table).write_state({history: idle}, {pool: Pool()}, NOW)
    histories, pools = DynamoIdleHistories(state_table).read_state([history], [pool])
    assert histories[history].idle_since == NOW
    assert set(pools) == {pool}
    assert_ids_fit(state_table)


def test_window_counts(state_table: str) -> None:
    from costguard.aws.windows import DynamoWindowCounter

    key = f"spot#{ACCOUNT}#{REGION}#{LONG_NAME}"
    counter = DynamoWindowCounter(state_table)
    counter.add(key, "i-0abc", NOW, timedelta(hours=1))
    counted = counter.add(key, "i-0def", NOW + timedelta(minutes=5), timedelta(hours=1))
    assert (counted.key, counted.count) == (key, 2)
    assert_ids_fit(state_table)


def test_training_failures_per_family(state_table: str) -> None:
    from costguard.aws.training_state import TrainingState
    from costguard.detect.job_families import Failure

    state = TrainingState(state_table)
    window = timedelta(hours=24)
    state.record_failure(ACCOUNT, REGION, LONG_NAME, Failure("job-1", NOW, "OOM", 1.0), window, NOW)
    history, new = state.record_failure(
        ACCOUNT, REGION, LONG_NAME, Failure("job-2", NOW, "OOM", 1.0), window, NOW
    )
    assert new and [f.job_name for f in history.failures] == ["job-1", "job-2"]
    assert_ids_fit(state_table)


def test_budget_breaches(state_table: str) -> None:
    from costguard.aws.budgets import BreachLog
    from costguard.detect.budgets import AlertType, BudgetAlert, Scope
    from costguard.detect.escalation import Escalation

    alert = BudgetAlert(name=LONG_NAME, alert_type=AlertType.ACTUAL)
    log = BreachLog(state_table)
    log.remember(alert, ACCOUNT, REGION, NOW, escalation=Escalation.STOP_ALL, scope=Scope())
    [(found, account, region)] = log.in_force(NOW)
    assert (found.name, account, region) == (LONG_NAME, ACCOUNT, REGION)
    assert_ids_fit(state_table)


# -- keys of an event's own account and region (not checked by the envelope) ---------------------------------------

LONG_REGION = "r" * 10_000


def test_training_days_finished_and_digested(state_table: str) -> None:
    from costguard.aws.training_state import TrainingState
    from costguard.detect.training_guardrails import JobSummary

    state = TrainingState(state_table)
    summary = JobSummary(
        job="nightly-eval",
        status="Completed",
        ended_at=NOW - timedelta(hours=3),
        instance_type="ml.g5.xlarge",
        instance_count=1,
        training_seconds=3600,
        billable_seconds=1800,
        cost_usd=1.5,
        spot=False,
        spot_saving_share=None,
        spot_saving_usd=None,
    )
    state.record_finished(ACCOUNT, LONG_REGION, summary)
    kept, _ = state.finished_on(ACCOUNT, LONG_REGION, summary.ended_at.date())
    assert [s.job for s in kept] == ["nightly-eval"]
    assert state.first_digest(ACCOUNT, LONG_REGION, NOW.date(), NOW)
    assert not state.first_digest(ACCOUNT, LONG_REGION, NOW.date(), NOW)
    assert_ids_fit(state_table)


def test_read_plans(state_table: str) -> None:
    from costguard.aws.read_plan import DynamoReadPlans
    from costguard.detect.read_schedule import Entry, Kind

    plans = DynamoReadPlans(state_table)
    entry = Entry(Kind.BOUND, due=NOW + timedelta(hours=1))
    assert plans.write(ACCOUNT, LONG_REGION, {}, {"i-0abc": entry}) == 1
    assert plans.read(ACCOUNT, LONG_REGION) == {"i-0abc": entry}
    assert_ids_fit(state_table)
