"""costguard: an event-driven GPU cost monitor and auto-remediator for AWS.

In a Lambda function (``AWS_LAMBDA_FUNCTION_NAME`` is set), the cyclic garbage collector is paused while the
handler's modules load: an import builds classes, schemas and tables that live as long as the process, so the
collections it would trigger (several full ones, over pydantic's schemas) find nothing to free and only lengthen
the cold start. The first invocation (``handler.lambda_entry``) calls ``resume_collector``: what the import built
is frozen out of the collector's way (``gc.freeze``) and collection resumes for the invocations' own objects.
Anywhere else (tests, the command line, the local stack) nothing is paused.
"""

import gc
import os

__version__ = "0.1.0"

_paused = bool(os.environ.get("AWS_LAMBDA_FUNCTION_NAME")) and gc.isenabled()
if _paused:
    gc.disable()


def resume_collector() -> None:
    """Resume the collector paused for the cold start's imports (once; a no-op when nothing was paused)."""
    global _paused
    if _paused:
        _paused = False
        gc.freeze()
        gc.enable()
