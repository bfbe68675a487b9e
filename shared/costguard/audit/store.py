"""The audit's S3 storage: intermediate results between the state machine's steps, the reports, their links."""

from __future__ import annotations

import json
from typing import Any

from costguard.aws import clients
from costguard.permissions import needs

WRITE_PERMISSIONS = needs("s3:PutObject")  # put_json, put_html
READ_PERMISSIONS = needs("s3:GetObject")  # get_json
# get_text: without ListBucket a missing key answers AccessDenied, not NoSuchKey.
READ_OPTIONAL_PERMISSIONS = READ_PERMISSIONS | needs("s3:ListBucket")
# presigned_link: the link is signed with this role and is only as good as its rights.
LINK_PERMISSIONS = needs("s3:GetObject")


def _s3() -> Any:
    return clients.client("s3")


def put_json(bucket: str, key: str, value: Any) -> str:
    body = json.dumps(value, separators=(",", ":"), default=str).encode()
    _s3().put_object(Bucket=bucket, Key=key, Body=body, ContentType="application/json")
    return key


def get_json(bucket: str, key: str) -> Any:
    return json.loads(_s3().get_object(Bucket=bucket, Key=key)["Body"].read())


def get_text(bucket: str, key: str) -> str | None:
    """An object's text, or None when there is no such key."""
    s3 = _s3()
    try:
        body: bytes = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    except s3.exceptions.NoSuchKey:
        return None
    return body.decode("utf-8")


def put_html(bucket: str, key: str, text: str) -> str:
    _s3().put_object(Bucket=bucket, Key=key, Body=text.encode(), ContentType="text/html; charset=utf-8")
    return key


def put_csv(bucket: str, key: str, text: str) -> str:
    _s3().put_object(Bucket=bucket, Key=key, Body=text.encode(), ContentType="text/csv; charset=utf-8")
    return key


def get_json_if_present(bucket: str, key: str) -> Any:
    """An object's JSON, or None when there is none. Without s3:ListBucket (the Report step has GetObject on
    reports/* only) S3 answers a missing key with AccessDenied, not NoSuchKey: both mean "none" here."""
    s3 = _s3()
    try:
        body: bytes = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    except s3.exceptions.NoSuchKey:
        return None
    except s3.exceptions.ClientError as error:
        if error.response.get("Error", {}).get("Code") in ("AccessDenied", "403"):
            return None
        raise
    return json.loads(body)


def presigned_link(bucket: str, key: str, hours: int) -> str:
    """A GET link. Signed with the function's role session, it stops working when that session ends,
    whichever comes first of ``hours`` and the session's own expiry."""
    url: str = _s3().generate_presigned_url(
        "get_object", Params={"Bucket": bucket, "Key": key}, ExpiresIn=hours * 3600
    )
    return url
