"""The hostile-input and soak figures: how many mutated events each handler survived, and the notifier soak.

Both are tests (tests/property, tests/integration/test_soak.py) that write what they tried to build/; this case
runs them afresh so the figures in results.json are this run's, not a leftover file's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "build"
TESTS = {
    "property": ("tests/property", BUILD / "property-figures.json"),
    "soak": ("tests/integration/test_soak.py", BUILD / "soak-figures.json"),
}


def bench_trust() -> dict[str, Any]:
    figures: dict[str, Any] = {}
    for name, (path, written) in TESTS.items():
        written.unlink(missing_ok=True)
        run = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", path],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            capture_output=True,
            text=True,
            check=False,
        )
        if run.returncode != 0:
            raise RuntimeError(f"{path} failed:\n{run.stdout[-3000:]}{run.stderr[-2000:]}")
        figures[name] = json.loads(written.read_text(encoding="utf-8"))
    handlers = figures["property"]["handlers"]
    figures["property"]["total_examples"] = sum(h["examples"] for h in handlers.values())
    return figures
