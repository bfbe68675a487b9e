"""What went wrong between the `costguard` command and AWS, in one sentence: no credentials, no region, refused
credentials, a call denied, an endpoint out of reach. None for an error that is not AWS's: it stays a bug.

botocore is not imported here: an error of its kind can only come from a run that has imported it already.
"""

from __future__ import annotations

import sys
from typing import Any

CREDENTIALS_HELP = (
    "set AWS_PROFILE (or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY), or sign in with `aws sso login` or "
    "`aws configure`"
)
REGION_HELP = "set AWS_REGION (or AWS_DEFAULT_REGION), or a region in your AWS profile"
# The answers AWS gives to credentials it does not take.
REFUSED_CREDENTIALS = frozenset(
    {
        "ExpiredToken",
        "ExpiredTokenException",
        "InvalidClientTokenId",
        "UnrecognizedClientException",
        "SignatureDoesNotMatch",
        "InvalidAccessKeyId",
        "AuthFailure",
        "RequestExpired",
    }
)
DENIED = frozenset(
    {"AccessDenied", "AccessDeniedException", "UnauthorizedOperation", "AuthorizationError", "Forbidden"}
)


def explain(error: BaseException, region_help: str = REGION_HELP) -> str | None:
    """The sentence for an error of botocore's (None: not one of those). ``region_help`` is what a command says
    to do for a missing region (its own option, say)."""
    exceptions: Any = sys.modules.get("botocore.exceptions")
    if exceptions is None or not isinstance(error, exceptions.BotoCoreError | exceptions.ClientError):
        return None
    if isinstance(error, exceptions.NoRegionError):
        return f"no AWS region is set: {region_help}"
    if isinstance(error, exceptions.NoCredentialsError | exceptions.PartialCredentialsError):
        return f"no AWS credentials were found: {CREDENTIALS_HELP}"
    if isinstance(error, exceptions.ProfileNotFound):
        return f"{error}: check AWS_PROFILE against your AWS configuration (~/.aws/config)"
    if isinstance(error, exceptions.TokenRetrievalError | exceptions.SSOError):
        return f"the AWS sign-in has expired or failed ({type(error).__name__}): run `aws sso login` again"
    if isinstance(error, exceptions.EndpointConnectionError | exceptions.ConnectTimeoutError):
        return f"AWS could not be reached ({error}): check the network and the region"
    if isinstance(error, exceptions.ClientError):
        return client_error(error)
    return f"AWS could not be called: {error}"


def client_error(error: Any) -> str:
    """A refusal from AWS, named by its operation and code."""
    body = error.response.get("Error", {})
    code = str(body.get("Code", "")) or "an error"
    message = str(body.get("Message", "")).strip()
    operation = getattr(error, "operation_name", "") or "a call"
    if code in REFUSED_CREDENTIALS:
        return f"AWS refused the credentials ({code}): they have expired or are wrong; {CREDENTIALS_HELP}"
    if code in DENIED:
        return f"AWS denied {operation} ({code}): the credentials' IAM policy does not allow it"
    said = f": {message[:300]}" if message else ""
    return f"AWS answered {operation} with {code}{said}"


def ends_the_run(error: BaseException) -> bool:
    """Missing, expired or refused credentials, or no region: every further call would fail the same way, so a
    command that goes on past a failed read (a region, a check) stops on these."""
    exceptions: Any = sys.modules.get("botocore.exceptions")
    if exceptions is None:
        return False
    if isinstance(
        error,
        exceptions.NoCredentialsError
        | exceptions.PartialCredentialsError
        | exceptions.NoRegionError
        | exceptions.ProfileNotFound
        | exceptions.TokenRetrievalError
        | exceptions.SSOError,
    ):
        return True
    if isinstance(error, exceptions.ClientError):
        return str(error.response.get("Error", {}).get("Code", "")) in REFUSED_CREDENTIALS
    return False
