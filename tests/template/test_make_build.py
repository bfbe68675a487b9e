"""`make build`: `sam build` finds python3.13 (the functions' runtime) even when only pyenv has it, by the same
PATH arrangement tests/template/test_sam.py uses: scripts/find-python's interpreter directory first on PATH."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.template import test_sam

pytestmark = pytest.mark.template

ROOT = Path(__file__).resolve().parents[2]
MAKEFILE = ROOT / "Makefile"


def _recipe(target: str) -> str:
    """The target's rule and recipe lines, as written."""
    lines = MAKEFILE.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if re.match(rf"{target}:", line))
    end = next((i for i in range(start + 1, len(lines)) if not lines[i].startswith("\t")), len(lines))
    return "\n".join(lines[start:end])


def test_the_build_target_puts_find_pythons_directory_first_on_path_then_runs_sams_build() -> None:
    recipe = _recipe("build")
    assert recipe.startswith("build: $(SAM_VENV)/.ready"), recipe
    assert "scripts/find-python 3.13" in recipe
    assert 'PATH="$$(dirname "$$py"):$$PATH" $(SAM_VENV)/bin/sam build' in recipe
    assert re.search(r"^\.PHONY:.*\bbuild\b", MAKEFILE.read_text(), re.MULTILINE), "build is not .PHONY"


def test_test_sam_arranges_path_the_same_way(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    env = test_sam._sam_env()
    first = Path(env["PATH"].split(os.pathsep)[0])
    assert (first / "python3.13").exists(), f"{first} holds no python3.13"
    assert env["PATH"].split(os.pathsep)[1:] == ["/usr/bin", "/bin"]


def _fake_pyenv(tmp_path: Path) -> tuple[Path, Path]:
    """A pyenv whose only python3.13 is under its versions/: the bin directory holding `pyenv`, and that python."""
    root = tmp_path / "pyenv"
    python = root / "versions" / "3.13.9" / "bin" / "python3.13"
    python.parent.mkdir(parents=True)
    python.symlink_to(sys.executable)
    shims = tmp_path / "pyenv-bin"
    shims.mkdir()
    pyenv = shims / "pyenv"
    pyenv.write_text(f'#!/bin/sh\n[ "$1" = root ] && echo "{root}"\n')
    pyenv.chmod(0o755)
    return shims, python


@pytest.mark.skipif(shutil.which("make") is None, reason="no make")
def test_make_build_runs_sam_with_pyenvs_python313_first_on_path(tmp_path: Path) -> None:
    """The recipe run for real, python3.13 only under pyenv, with a stand-in `sam` reporting what it got."""
    shims, python = _fake_pyenv(tmp_path)
    path = f"/usr/bin:/bin:{shims}"
    if subprocess.run(["sh", "-c", "command -v python3.13"], env={"PATH": path}, check=False).returncode == 0:
        pytest.skip("a python3.13 is on the system PATH: the pyenv case cannot be shown here")
    venv = tmp_path / "sam-venv"
    (venv / "bin").mkdir(parents=True)
    (venv / ".ready").touch()  # newer than requirements-sam.txt: make does not set the environment up
    sam = venv / "bin" / "sam"
    sam.write_text(
        '#!/bin/sh\necho "args: $*"\necho "python: $(command -v python3.13)"\necho "path: $PATH"\n'
    )
    sam.chmod(0o755)
    result = subprocess.run(
        [
            "make",
            "--no-print-directory",
            "-C",
            str(ROOT),
            "build",
            f"SAM_VENV={venv}",
            "SAM_ARGS=--no-cached",
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "PATH": path},
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    out = dict(line.split(": ", 1) for line in result.stdout.splitlines() if ": " in line)
    assert out["args"] == "build --no-cached"
    assert out["path"].split(":")[0] == str(python.parent)
    assert out["python"] == str(python)


@pytest.mark.skipif(shutil.which("make") is None, reason="no make")
def test_make_setup_build_needs_no_apt_and_no_browser(tmp_path: Path) -> None:
    """The README's deploy step on a machine without apt or Chromium (macOS, say): `make setup build` runs only
    what `sam build` needs. The environments are stand-ins already made; PATH holds a shell, dirname and a
    python3.13, and no apt-get, sudo or chromium."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("sh", "dirname"):
        found = shutil.which(tool)
        assert found, tool
        (bin_dir / tool).symlink_to(found)
    (bin_dir / "python3.13").symlink_to(sys.executable)
    for absent in ("apt-get", "chromium", "sudo"):
        assert shutil.which(absent, path=str(bin_dir)) is None
    venvs = {}
    for name in ("VENV", "SAM_VENV"):
        venv = tmp_path / name.lower()
        (venv / "bin").mkdir(parents=True)
        (venv / ".ready").touch()  # newer than their requirements: make leaves them be
        venvs[name] = venv
    sam = venvs["SAM_VENV"] / "bin" / "sam"
    sam.write_text('#!/bin/sh\necho "sam $*"\n')
    sam.chmod(0o755)
    result = subprocess.run(
        [str(shutil.which("make")), "--no-print-directory", "-C", str(ROOT), "setup", "build"]
        + [f"{name}={venv}" for name, venv in venvs.items()],
        capture_output=True,
        text=True,
        env={"PATH": str(bin_dir), "HOME": str(tmp_path)},
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "sam build" in result.stdout
    assert "chromium" not in result.stdout + result.stderr
    assert "apt" not in result.stdout + result.stderr
    # The tests' own prerequisites stay with the tests.
    assert "ensure-chromium" in _recipe("test-setup")
    assert _recipe("unit").startswith("unit: test-setup")
