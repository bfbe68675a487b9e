"""Hypothesis strategies that turn a real event into a hostile one: fields lost, added, retyped, bloated."""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st

Path = tuple[str | int, ...]

# A value of any JSON type, NaN and infinities included (Python's json reads them).
json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**64), max_value=2**64),
    st.floats(),
    st.text(max_size=40),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=12), inner, max_size=3),
    max_leaves=6,
)

# EventBridge refuses events over 256 KB, so a hostile field stays under that once encoded.
huge_strings = st.sampled_from(
    [
        "x" * 200_000,
        "\U0001f600" * 60_000,  # 4 bytes each in UTF-8, 12 characters each once JSON-escaped
        "\u202e\u0000\ufeff" * 20_000,  # right-to-left override, NUL, byte order mark
        "' OR 1=1 --" + "A" * 100_000,
    ]
)
unicode_strings = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), min_size=1, max_size=60
)

# Times in every spelling AWS uses, and some it never does.
times = st.one_of(
    st.integers(min_value=0, max_value=4_102_444_800_000),  # epoch seconds or millis
    st.integers(min_value=0, max_value=4_102_444_800_000).map(str),
    st.datetimes(timezones=st.timezones() | st.none()).map(lambda at: at.isoformat()),
    st.datetimes().map(lambda at: at.strftime("%Y-%m-%dT%H:%M:%S.000+0000")),
    st.sampled_from(
        ["", "now", "2026-13-45T99:99:99Z", "-1", "1e400", "NaN", "Fri, 20 Nov 2026 11:30:00 GMT"]
    ),
    st.floats(),
)
_TIME_KEY = re.compile(r"time|date|(^|[a-z])At$", re.IGNORECASE)

# Identifiers that look real but name nothing in the world: resources that no longer exist.
_ID = re.compile(r"^(?P<head>(arn:[^/]*[:/])?(i|cr|sir|vol)-|arn:.*[:/])(?P<tail>[^/:]+)$")
ghost_suffixes = st.text(alphabet="0123456789abcdef", min_size=8, max_size=17)


def paths(value: Any, prefix: Path = ()) -> list[Path]:
    """Every place in a JSON document, the document itself first."""
    found = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            found.extend(paths(item, (*prefix, key)))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found.extend(paths(item, (*prefix, index)))
    return found


def _get(document: Any, path: Path) -> Any:
    for step in path:
        document = document[step]
    return document


def _set(document: Any, path: Path, value: Any) -> Any:
    if not path:
        return value
    _get(document, path[:-1])[path[-1]] = value
    return document


def _delete(document: Any, path: Path) -> Any:
    if not path:
        return {}
    parent = _get(document, path[:-1])
    del parent[path[-1]]
    return document


Mutation = Callable[[Any], Any]


@st.composite
def _one_mutation(draw: st.DrawFn, document: Any) -> Any:
    """Apply one drawn change to (a copy of) the document and return it."""
    everywhere = paths(document)
    kind = draw(st.sampled_from(["drop", "add", "retype", "huge", "unicode", "time", "ghost"]))
    if kind == "drop" and len(everywhere) > 1:
        return _delete(document, draw(st.sampled_from(everywhere[1:])))
    containers = [p for p in everywhere if isinstance(_get(document, p), dict | list)]
    if kind == "add" and containers:
        where = _get(document, draw(st.sampled_from(containers)))
        value = draw(json_values)
        if isinstance(where, dict):
            where[draw(st.text(max_size=20))] = value
        else:
            where.insert(draw(st.integers(0, len(where))), value)
        return document
    if kind == "retype":
        return _set(document, draw(st.sampled_from(everywhere)), draw(json_values))
    strings = [p for p in everywhere if p and isinstance(_get(document, p), str)]
    if kind in ("huge", "unicode") and strings:
        value = draw(huge_strings if kind == "huge" else unicode_strings)
        return _set(document, draw(st.sampled_from(strings)), value)
    if kind == "time":
        timed = [p for p in everywhere if p and isinstance(p[-1], str) and _TIME_KEY.search(p[-1])]
        if timed:
            return _set(document, draw(st.sampled_from(timed)), draw(times))
    if kind == "ghost":
        named = [p for p in strings if _ID.match(_get(document, p))]
        if named:
            where = draw(st.sampled_from(named))
            match = _ID.match(_get(document, where))
            assert match is not None
            return _set(document, where, match["head"] + draw(ghost_suffixes))
    return document


@st.composite
def hostile_events(draw: st.DrawFn, originals: list[dict[str, Any]]) -> Any:
    """A real event with one to four changes, or now and then not an event at all."""
    if draw(st.integers(0, 19)) == 0:
        return draw(st.one_of(json_values, st.just([]), st.just("")))
    document: Any = copy.deepcopy(draw(st.sampled_from(originals)))
    for _ in range(draw(st.integers(1, 4))):
        document = draw(_one_mutation(document))
    return document
