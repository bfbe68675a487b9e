"""Every function starts with pydantic's plugins off (PYDANTIC_DISABLE_PLUGINS, a cold start's entry-point scan
saved), which changes nothing only while no pydantic plugin is installed."""

from __future__ import annotations

from importlib.metadata import entry_points
from pathlib import Path

import pytest

from costguard.local.template import Template

pytestmark = pytest.mark.template

TEMPLATE = Path(__file__).resolve().parents[2] / "template.yaml"


def test_every_function_starts_with_pydantic_plugins_off() -> None:
    assert Template.load(TEMPLATE).global_environment()["PYDANTIC_DISABLE_PLUGINS"] == "__all__"


def test_no_installed_distribution_is_a_pydantic_plugin() -> None:
    # The development environment holds the layer's dependencies (shared/requirements.txt) and more: a plugin
    # among them would be switched off in Lambda by the variable above.
    assert not list(entry_points(group="pydantic"))
