"""The local path: an embedded AWS (moto) seeded from a world file, replay, demo and redrive."""

import os

# The template's Globals for powertools, set before anything loads it: costguard.observability builds its Logger
# and Metrics when first imported, and the local tools load parts of the domain that reach it (the price book,
# the detectors) before any handler runs. A deployed function has them from its environment.
os.environ.setdefault("POWERTOOLS_SERVICE_NAME", "costguard")
os.environ.setdefault("POWERTOOLS_METRICS_NAMESPACE", "Costguard")
