"""The costguard layer leaves the local-only code out: template.yaml builds it with shared/Makefile, whose rule
copies the package without local/ and backtest/ and installs the arm64 wheels of its dependencies."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from costguard.local.template import Template
from tests.conftest import ROOT

pytestmark = pytest.mark.template

PACKAGE = ROOT / "shared" / "costguard"
LOCAL_ONLY = ("local", "backtest", "ops", "cli.py")


def test_the_layer_is_built_by_the_makefile_rule() -> None:
    layer = Template.load(ROOT / "template.yaml").resources["CostguardLayer"]
    assert layer["Properties"]["ContentUri"] == "shared/"
    assert layer["Metadata"]["BuildMethod"] == "makefile"
    assert layer["Metadata"]["BuildArchitecture"] == "arm64"
    assert "build-CostguardLayer:" in (ROOT / "shared" / "Makefile").read_text()


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """The rule run for real, with a stand-in interpreter recording the pip call instead of downloading."""
    tmp = tmp_path_factory.mktemp("layer")
    recorded = tmp / "pip-args"
    python = tmp / "python"
    python.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > "{recorded}"\n')
    python.chmod(0o755)
    artifacts = tmp / "artifacts"
    done = subprocess.run(
        [
            "make",
            "--no-print-directory",
            "-C",
            str(ROOT / "shared"),
            "build-CostguardLayer",
            f"ARTIFACTS_DIR={artifacts}",
            f"LAYER_PYTHON={python}",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return artifacts / "python", recorded.read_text().splitlines()


def test_the_built_layer_holds_the_package_without_its_local_only_code(built: tuple[Path, list[str]]) -> None:
    layer, _ = built
    package = layer / "costguard"
    for folder in LOCAL_ONLY:
        assert (PACKAGE / folder).exists(), f"the source has no {folder}: this test checks nothing"
        assert not (package / folder).exists(), f"costguard/{folder} is in the layer"
    shipped = {p.relative_to(package) for p in package.rglob("*") if p.is_file()}
    source = {
        p.relative_to(PACKAGE)
        for p in PACKAGE.rglob("*")
        if p.is_file() and p.relative_to(PACKAGE).parts[0] not in LOCAL_ONLY and "__pycache__" not in p.parts
    }
    assert shipped == source  # every other module and data file (prices, rules), and nothing else
    assert Path("handler.py") in shipped and Path("audit", "rules.json") in shipped
    assert not list(package.rglob("__pycache__"))


def test_the_layers_dependencies_are_the_arm64_wheels_of_requirements(built: tuple[Path, list[str]]) -> None:
    layer, args = built
    assert args[:2] == ["-m", "pip"] and "install" in args
    assert args[args.index("--platform") + 1] == "manylinux2014_aarch64"
    assert args[args.index("--python-version") + 1] == "3.13"
    assert "--only-binary=:all:" in args
    assert Path(args[args.index("--target") + 1]) == layer
    assert args[args.index("-r") + 1] == "requirements.txt"
