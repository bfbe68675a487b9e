"""No vacuous case comes back in the test files that once passed without asserting anything (issue "a green run
means what it says"): a test that asserts only under an if/for/while, returns early, takes any exception as the
one it expects, or asserts ``all()`` over a collection never shown to hold anything."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GUARDED = (
    "tests/unit/test_audit_fit.py",
    "tests/unit/test_read_schedule.py",
    "tests/integration/test_unfilled_secret.py",
)
BRANCHES = (ast.If, ast.For, ast.AsyncFor, ast.While)
NESTED = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
ANY_ERROR = {"Exception", "BaseException"}


def _body(node: ast.AST, branched: bool = False) -> Iterator[tuple[ast.AST, bool]]:
    """Each node of a test (not of the functions defined in it), and whether an if/for/while holds it."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, NESTED):
            continue
        yield child, branched
        yield from _body(child, branched or isinstance(child, BRANCHES))


def _is_raises(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "raises"
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "pytest"
    )


def _is_all(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "all"


def _outside_all(node: ast.AST) -> Iterator[ast.AST]:
    """The expressions of ``node`` that are not inside an ``all(...)``."""
    if _is_all(node):
        return
    yield node
    for child in ast.iter_child_nodes(node):
        yield from _outside_all(child)


def _shown_before(nodes: list[ast.AST], line: int) -> set[str]:
    """The expressions (as source) an assert at or before ``line`` mentions outside ``all()``, and those unpacked
    (``[x] = xs``) before it: each is shown to hold something, or asserted of explicitly."""
    shown: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Assert) and node.lineno <= line:
            shown |= {ast.unparse(e) for e in _outside_all(node.test)}
        elif (
            isinstance(node, ast.Assign)
            and node.lineno < line
            and isinstance(node.targets[0], ast.List | ast.Tuple)
        ):
            shown.add(ast.unparse(node.value))
    return shown


def vacuous(source: str) -> list[str]:
    """Each test function of ``source`` that could pass without checking anything, and why."""
    found: list[str] = []
    for test in ast.walk(ast.parse(source)):
        if not isinstance(test, ast.FunctionDef | ast.AsyncFunctionDef) or not test.name.startswith("test_"):
            continue
        body = list(_body(test))
        nodes = [node for node, _ in body]
        checks = [
            branched
            for node, branched in body
            if isinstance(node, ast.Assert)
            or (isinstance(node, ast.withitem) and _is_raises(node.context_expr))
        ]
        if not checks:
            found.append(f"{test.name}: asserts nothing")
        elif all(checks):
            found.append(
                f"{test.name}: every assert is under an if/for/while (none runs when it is not entered)"
            )
        for node in nodes:
            if isinstance(node, ast.Return):
                found.append(f"{test.name}: returns early (line {node.lineno})")
            if (
                _is_raises(node)
                and isinstance(node, ast.Call)
                and node.args
                and isinstance(node.args[0], ast.Name)
                and node.args[0].id in ANY_ERROR
                and not any(k.arg == "match" for k in node.keywords)
            ):
                found.append(
                    f"{test.name}: pytest.raises({node.args[0].id}) without match= (line {node.lineno})"
                )
            if isinstance(node, ast.Assert):
                for call in ast.walk(node.test):
                    if not (_is_all(call) and isinstance(call, ast.Call) and call.args):
                        continue
                    argument = call.args[0]
                    if not isinstance(argument, ast.GeneratorExp | ast.ListComp | ast.SetComp):
                        continue
                    collection = ast.unparse(argument.generators[0].iter)
                    if collection not in _shown_before(nodes, node.lineno):
                        found.append(
                            f"{test.name}: all() over {collection}, never shown to hold anything "
                            f"(line {node.lineno})"
                        )
    return found


@pytest.mark.parametrize("path", GUARDED)
def test_no_test_in_the_file_can_pass_without_checking_anything(path: str) -> None:
    assert vacuous((ROOT / path).read_text(encoding="utf-8")) == []


# -- the guard itself: it finds each kind, and passes a test that checks what it gets ------------------------

FLAGGED = {
    "under a loop": """
def test_x():
    for f in findings():
        assert f.ok
""",
    "under an if": """
def test_x():
    found = evaluate()
    if found:
        assert found[0].ok
""",
    "no assert": """
def test_x():
    evaluate()
""",
    "early return": """
def test_x():
    if evaluate() is None:
        return
    assert True
""",
    "any exception": """
def test_x():
    with pytest.raises(Exception):
        evaluate()
""",
    "all() over nothing shown": """
def test_x():
    findings = evaluate()
    assert all(f.ok for f in findings)
""",
}


@pytest.mark.parametrize("kind", FLAGGED)
def test_the_guard_finds_each_kind_of_vacuous_test(kind: str) -> None:
    [problem] = vacuous(FLAGGED[kind])
    assert problem.startswith("test_x: ")


def test_the_guard_passes_a_test_that_checks_what_it_gets() -> None:
    source = """
def test_x():
    findings = evaluate()
    assert findings
    assert all(f.ok for f in findings)
    [one], _ = evaluate()
    for alternative in one.alternatives:
        assert alternative.ok
    with pytest.raises(Exception, match="no value yet"):
        evaluate()
    with pytest.raises(KeyError):
        evaluate()

    def helper():
        return 1
"""
    assert vacuous(source) == []
