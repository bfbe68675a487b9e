"""The layers hold by contract: what a module imports when it loads (module level, outside TYPE_CHECKING), checked
over the import graph of shared/costguard; and the rooms stand on floors (imports under TYPE_CHECKING counted too).

- The domain (model, events, detect, policy, windows, settings, clock, permissions) loads no adapter: no boto3 or
  botocore, nothing from aws/, act/, notify/, flows/, interact/, runtime.
- Nothing a Lambda function loads imports local/, ops/, cli or backtest/ (they stay out of the layer's code path).
- The embedded stack (local/) loads nothing of the account commands (ops/) or the command line (cli).
- No flow loads another flow: what two flows share lives outside flows/ (an adapter, a detector, fleet.py).

The rooms (each top-level module or package of costguard, the package's own __init__ included) stand on FLOORS,
lowest first. Counting imports under TYPE_CHECKING too: no room imports a room on a higher floor, and no rooms
import each other, directly or round a longer cycle (sideways within a floor is fine when it is one way). Every
room is on a floor, so a new one must be placed; ALLOWED names (importer, imported) exceptions and starts empty.

A lazy import inside a function is the way to reach an adapter from the domain only when a path needs it, and
is no edge for any of these rules.
"""

from __future__ import annotations

import ast
import shutil
from collections.abc import Callable, Iterable
from itertools import pairwise
from pathlib import Path

import pytest

from tests.conftest import ROOT

PACKAGE = ROOT / "shared" / "costguard"
DOMAIN = ("model", "events", "detect", "policy", "windows", "settings", "clock", "permissions")
ADAPTERS: tuple[str, ...] = ("costguard.aws", "costguard.act", "costguard.notify", "costguard.flows")
ADAPTERS += ("costguard.interact", "costguard.runtime", "costguard.local", "costguard.backtest")
ADAPTERS += ("costguard.ops", "costguard.cli")
LOCAL_ONLY = ("costguard.local", "costguard.backtest", "costguard.ops", "costguard.cli")
FLOWS = "costguard.flows."
# Lowest first. A room imports only rooms on its own floor or below.
FLOORS: tuple[tuple[str, ...], ...] = (
    # the ground: plain types and values, time, IAM declarations, logging (__init__: the package itself)
    ("__init__", "model", "events", "clock", "windows", "permissions", "observability"),
    # the domain: decisions, prices, detectors, and the settings (validated with their parsers)
    ("policy", "pricing", "detect", "settings", "ledger"),
    # AWS adapters, the reads the flows make as Protocols, and their in-memory twins
    ("aws", "reads", "twins"),
    ("act",),  # acting: stop, mark, the stop cap
    ("notify",),  # telling: the message, its routing and delivery, the values of its buttons
    ("interact",),  # the buttons clicked
    # what a flow is built from: the event's entry, decide-act-notify, the runtime, the sweeps' helpers, the audit
    ("entry", "pipeline", "runtime", "fleet", "idle_policy", "audit"),
    ("flows",),
    ("handler",),  # the shell every app.py builds its handler with
    # local only: the embedded stack, the backtest, the account commands, the command line
    ("local", "backtest", "ops", "cli"),
)
# (importer room, imported room) imports let through despite the floors or a cycle; each must still be needed.
ALLOWED: frozenset[tuple[str, str]] = frozenset()


def modules(package: Path) -> dict[str, Path]:
    found = {}
    for path in package.rglob("*.py"):
        name = ".".join(("costguard", *path.relative_to(package).with_suffix("").parts))
        found[name.removesuffix(".__init__")] = path
    return found


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def load_time_imports(source: str, *, type_checking: bool = False) -> set[str]:
    """What a module imports as it loads: its top-level statements (and their if/try blocks); with
    ``type_checking``, what it imports under ``if TYPE_CHECKING:`` too."""
    found: set[str] = set()

    def visit(body: Iterable[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                found.add(node.module)
                found.update(f"{node.module}.{alias.name}" for alias in node.names)
            elif isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.If) and (type_checking or not _type_checking(node.test)):
                visit(node.body)
                visit(node.orelse)
            elif isinstance(node, ast.Try):
                visit(node.body)
                visit(node.orelse)
                visit(node.finalbody)
                for handler in node.handlers:
                    visit(handler.body)

    visit(ast.parse(source).body)
    return found


def graph(package: Path, *, type_checking: bool = False) -> dict[str, set[str]]:
    known = modules(package)

    def resolved(name: str) -> str:  # `from costguard.aws import clients` is the module costguard.aws.clients
        return name if name in known or name.rsplit(".", 1)[0] not in known else name.rsplit(".", 1)[0]

    edges: dict[str, set[str]] = {}
    for name, path in known.items():
        source = path.read_text(encoding="utf-8")
        imported = {resolved(i) for i in load_time_imports(source, type_checking=type_checking)}
        # Loading a module loads its parent packages first.
        parents = {".".join(name.split(".")[:n]) for n in range(2, name.count(".") + 1)}
        edges[name] = {i for i in imported | parents if i != name}
    return edges


def chain(edges: dict[str, set[str]], start: str, wrong: Callable[[str], bool]) -> list[str] | None:
    """The shortest chain of load-time imports from ``start`` to a module ``wrong`` accepts, if any."""
    before: dict[str, str | None] = {start: None}
    queue = [start]
    while queue:
        current = queue.pop(0)
        for target in sorted(edges.get(current, ())):
            if target in before:
                continue
            before[target] = current
            if wrong(target):
                path = [target]
                while (previous := before[path[-1]]) is not None:
                    path.append(previous)
                return list(reversed(path))
            queue.append(target)
    return None


def violations(package: Path) -> list[str]:
    edges = graph(package)
    found = []

    def adapter(name: str) -> bool:
        return name.split(".")[0] in ("boto3", "botocore") or name.startswith(ADAPTERS)

    for name in sorted(edges):
        layer = name.split(".")[1] if "." in name else ""
        if layer in DOMAIN and (path := chain(edges, name, adapter)):
            found.append("domain loads an adapter: " + " -> ".join(path))
        lambda_path = bool(layer) and f"costguard.{layer}" not in LOCAL_ONLY
        if lambda_path and (path := chain(edges, name, lambda n: n.startswith(LOCAL_ONLY))):
            found.append("the Lambda path loads local-only code: " + " -> ".join(path))
        if name.startswith(FLOWS) and (path := chain(edges, name, lambda n: n.startswith(FLOWS))):
            found.append("a flow loads another flow: " + " -> ".join(path))
    return found


def test_the_layers_hold() -> None:
    assert violations(PACKAGE) == []


def room(module: str) -> str:
    """The room a module is in: its top-level module or package under costguard (``__init__``: the package's)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def room_graph(package: Path, allowed: frozenset[tuple[str, str]] = ALLOWED) -> dict[tuple[str, str], str]:
    """Each import of one room by another (at load time or under TYPE_CHECKING) but those ``allowed``, with the
    first module-level import behind it."""
    edges = graph(package, type_checking=True)
    found: dict[tuple[str, str], str] = {}
    for name in sorted(edges):
        for target in sorted(t for t in edges[name] if t in edges):
            pair = (room(name), room(target))
            if pair[0] != pair[1] and pair not in allowed:
                found.setdefault(pair, f"{name} -> {target}")
    return found


def room_violations(package: Path, allowed: frozenset[tuple[str, str]] = ALLOWED) -> list[str]:
    """Rooms on no floor, imports of a higher floor, and cycles of rooms (each named once, by its imports)."""
    floor = {name: level for level, names in enumerate(FLOORS) for name in names}
    rooms = {room(name) for name in modules(package)}
    found = [f"a room on no floor (place it in FLOORS): {name}" for name in sorted(rooms - floor.keys())]
    edges = room_graph(package, allowed)
    for (importer, imported), why in sorted(edges.items()):
        if floor.get(importer, len(FLOORS)) < floor.get(imported, -1):
            found.append(
                f"an upward import: {importer} (floor {floor[importer]}) -> {imported} (floor {floor[imported]}): "
                + why
            )
    following: dict[str, set[str]] = {}
    for importer, imported in edges:
        following.setdefault(importer, set()).add(imported)
    seen: set[frozenset[str]] = set()
    for start in sorted(following):
        cycles = [
            [start, *path] for n in sorted(following[start]) if (path := chain(following, n, start.__eq__))
        ]
        if cycles and (cycle := min(cycles, key=len)) and frozenset(cycle) not in seen:
            seen.add(frozenset(cycle))
            imports = ", ".join(edges[pair] for pair in pairwise(cycle))
            found.append(f"rooms in a cycle: {' -> '.join(cycle)} ({imports})")
    return found


def test_the_rooms_stand_on_their_floors_without_a_cycle() -> None:
    assert room_violations(PACKAGE) == []


def module_cycles(package: Path) -> list[str]:
    """Modules that import each other, directly or round a longer cycle, at load time or under TYPE_CHECKING
    (a package's import of its own parent package is not counted: loading a module loads its parents first).
    Each cycle named once, shortest first, by its modules."""
    edges = {
        name: {t for t in targets if t in modules_of and not name.startswith(t + ".")}
        for modules_of in [graph(package, type_checking=True)]
        for name, targets in modules_of.items()
    }
    found: list[str] = []
    seen: set[frozenset[str]] = set()
    for start in sorted(edges):
        cycles = [[start, *path] for n in sorted(edges[start]) if (path := chain(edges, n, start.__eq__))]
        if cycles and (cycle := min(cycles, key=len)) and frozenset(cycle) not in seen:
            seen.add(frozenset(cycle))
            found.append("modules in a cycle: " + " -> ".join(cycle))
    return found


def test_no_two_modules_lean_on_each_other() -> None:
    """Issue 44: no import cycle among the package's modules, whatever their rooms (a cycle within a room too:
    local/interactions <-> local/replay, notify/slack_api <-> notify/slack_retry were two)."""
    assert module_cycles(PACKAGE) == []


@pytest.mark.parametrize(
    ("module", "source", "expected"),
    [
        (  # within one room: the interactions' replay leaning on the replay that routes them
            "local/interactions.py",
            "\nfrom costguard.local.replay import replay_event\n",
            "modules in a cycle: costguard.local.interactions -> costguard.local.replay -> "
            "costguard.local.interactions",
        ),
        (  # under TYPE_CHECKING: the retry policy typing the client it retries for
            "notify/slack_limits.py",
            "\nfrom typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from costguard.notify.slack_api import SlackApi\n",
            "costguard.notify.slack_api",
        ),
    ],
    ids=["cycle in a room", "type-checking cycle"],
)
def test_a_module_cycle_fails_the_contract(tmp_path: Path, module: str, source: str, expected: str) -> None:
    package = copied(tmp_path)
    assert module_cycles(package) == []
    planted = package / module
    planted.write_text(planted.read_text(encoding="utf-8") + source)
    found = module_cycles(package)
    assert found and any(expected in line for line in found), found


def test_each_floor_names_rooms_that_are_there_once() -> None:
    placed = [name for names in FLOORS for name in names]
    assert len(placed) == len(set(placed)), placed
    assert sorted(set(placed) - {room(name) for name in modules(PACKAGE)}) == []


def unneeded(package: Path, allowed: frozenset[tuple[str, str]]) -> list[tuple[str, str]]:
    """The exceptions of ``allowed`` whose import is gone or breaks no rule (each must go when it is fixed)."""
    return [
        pair
        for pair in sorted(allowed)
        if len(room_violations(package, allowed - {pair})) == len(room_violations(package, allowed))
    ]


def test_each_allowed_exception_is_still_needed() -> None:
    assert unneeded(PACKAGE, ALLOWED) == []


def test_every_function_loads_no_local_only_code() -> None:
    edges = graph(PACKAGE)
    for app in sorted((ROOT / "functions").glob("*/app.py")):
        imported = {
            i for i in load_time_imports(app.read_text(encoding="utf-8")) if i.startswith("costguard")
        }
        for name in imported:
            start = name if name in edges else name.rsplit(".", 1)[0]
            assert not start.startswith(LOCAL_ONLY), app
            assert chain(edges, start, lambda n: n.startswith(LOCAL_ONLY)) is None, (app, name)


@pytest.mark.parametrize(
    ("module", "source", "expected"),
    [
        (
            "detect/idle.py",
            "from costguard.aws import clients\n",
            "costguard.detect.idle -> costguard.aws",
        ),
        ("policy.py", "import boto3\n", "costguard.policy -> boto3"),
        ("flows/gpu.py", "from costguard.local.world import World\n", "local-only code"),
        (
            "flows/gpu.py",
            "from costguard.flows.sagemaker import gpu_queries\n",
            "costguard.flows.gpu -> costguard.flows.sagemaker",
        ),
    ],
)
def test_a_wrong_way_import_fails_the_contract(
    tmp_path: Path, module: str, source: str, expected: str
) -> None:
    package = tmp_path / "costguard"
    for name in (
        "__init__.py",
        "aws/__init__.py",
        "aws/clients.py",
        "detect/__init__.py",
        "flows/__init__.py",
        "flows/sagemaker.py",
    ):
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        (package / name).write_text("")
    (package / "local").mkdir()
    (package / "local" / "__init__.py").write_text("")
    (package / "local" / "world.py").write_text("")
    assert violations(package) == []
    (package / module).write_text(source)
    found = violations(package)
    assert found and any(expected in line for line in found), found


def copied(tmp_path: Path) -> Path:
    """A copy of the package's modules (its .py files), to plant a wrong import in."""

    def left_out(folder: str, names: list[str]) -> list[str]:
        return [
            n for n in names if n == "__pycache__" or not (n.endswith(".py") or (Path(folder) / n).is_dir())
        ]

    return Path(shutil.copytree(PACKAGE, tmp_path / "costguard", ignore=left_out))


TYPE_CHECKED = (
    "\nfrom typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from costguard.settings import Settings\n"
)


@pytest.mark.parametrize(
    ("module", "source", "expected"),
    [
        (  # sideways within a floor, but round: detect prices with pricing
            "pricing/transfer.py",
            "from costguard.detect import gpu\n",
            "rooms in a cycle: detect -> pricing -> detect (costguard.detect.batch -> costguard.pricing, "
            "costguard.pricing.transfer -> costguard.detect)",
        ),
        (  # under TYPE_CHECKING: the settings validate with the policy's parsers
            "policy.py",
            TYPE_CHECKED,
            "rooms in a cycle: policy -> settings -> policy (costguard.policy -> costguard.settings, "
            "costguard.settings -> costguard.policy)",
        ),
        (
            "clock.py",
            "from costguard.pricing import Price\n",
            "an upward import: clock (floor 0) -> pricing (floor 1): costguard.clock -> costguard.pricing",
        ),
        ("garden.py", "from costguard import model\n", "a room on no floor (place it in FLOORS): garden"),
    ],
    ids=["cycle", "type-checking cycle", "upward", "unplaced room"],
)
def test_a_room_cycle_or_an_upward_import_fails_the_contract(
    tmp_path: Path, module: str, source: str, expected: str
) -> None:
    package = copied(tmp_path)
    planted = package / module
    planted.write_text((planted.read_text(encoding="utf-8") if planted.exists() else "") + source)
    found = room_violations(package)
    assert expected in found, found


def test_an_exception_no_longer_needed_fails_the_contract(tmp_path: Path) -> None:
    package = tmp_path / "costguard"
    for name in ("__init__.py", "clock.py", "pricing/__init__.py"):
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        (package / name).write_text("")
    allowed = frozenset({("clock", "pricing")})
    assert room_violations(package) == [] and unneeded(package, allowed) == [("clock", "pricing")]
    (package / "clock.py").write_text("from costguard.pricing import Price\n")
    assert room_violations(package) and room_violations(package, allowed) == []
    assert unneeded(package, allowed) == []


def test_a_lazy_import_inside_a_function_is_allowed() -> None:
    source = "def price():\n    from costguard.aws.price_list import live_price\n    return live_price\n"
    assert load_time_imports(source) == set()
    guarded = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from costguard.aws import clients\n"
    assert load_time_imports(guarded) == {"typing", "typing.TYPE_CHECKING"}


LONGEST_FUNCTION = 80  # lines, decorators and docstring included


def test_no_function_of_the_package_is_longer_than_a_screen() -> None:
    long = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                lines = (node.end_lineno or node.lineno) - first + 1
                if lines > LONGEST_FUNCTION:
                    long.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {node.name} ({lines} lines)")
    assert not long, long


def test_the_documented_layout_names_every_module_and_package_of_the_package() -> None:
    import re

    layout = (
        (ROOT / "docs" / "architecture.md")
        .read_text(encoding="utf-8")
        .split("## Project layout", 1)[1]
        .split("```", 2)[1]
    )
    entries = [
        p.name if p.suffix == ".py" else f"{p.name}/"
        for p in sorted(PACKAGE.iterdir())
        if (p.suffix == ".py" and p.name != "__init__.py") or (p / "__init__.py").is_file()
    ]
    assert entries
    missing = [e for e in entries if not re.search(rf"(^|\s){re.escape(e)}", layout, re.MULTILINE)]
    assert not missing, missing


def test_the_embedded_stack_leans_on_no_account_command() -> None:
    """local/ (the embedded stack) imports nothing of ops/ (the account commands) or cli.py, at load time or
    lazily: the command line leans on both rooms, neither on the other's commands."""
    local = sorted((PACKAGE / "local").rglob("*.py"))
    assert local
    leaning = [
        f"{path.relative_to(PACKAGE)}: {name}"
        for path in local
        for name in sorted(all_imports(path.read_text(encoding="utf-8")))
        if name.startswith(("costguard.ops", "costguard.cli"))
    ]
    assert not leaning, leaning


def all_imports(source: str) -> set[str]:
    """Every module a source imports, wherever the import statement is (module level or inside a function)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found
