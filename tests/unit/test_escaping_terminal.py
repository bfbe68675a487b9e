"""Names that reach a person raw (issue 39, case 6), on the command line: `costguard doctor` (and every command
that prints a resource's name) shows a control character as its escape, so a FIX line cannot display as OK."""

from __future__ import annotations

import re

import pytest

from costguard.local.terminal import printable
from costguard.ops.doctor import Status, build_report, render
from tests.unit.test_doctor_report import facts, instance

HOSTILE_NAME = "\x1b[32mOK\x1b[0m\r\x07"
# ESC, CR, BEL and every other C0/C1 control but the newlines a report is made of.
RAW = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f]")


def test_doctor_prints_a_hostile_name_escaped_and_its_fix_line_stays_a_fix() -> None:
    silent = instance(1, tags={"Name": HOSTILE_NAME})
    report = build_report(facts(instances=[silent]))
    [check] = [c for c in report.checks if c.area == "GPU metrics"]
    assert check.status is Status.FIX and HOSTILE_NAME in check.subject  # the check holds the name as read

    text = render(report)
    assert not RAW.search(text), repr(RAW.search(text))
    assert "\x1b" not in text and "\r" not in text and "\x07" not in text
    [line] = [line for line in text.splitlines() if silent.id in line]
    assert line.lstrip().startswith("FIX ") and "\\x1b[32mOK\\x1b[0m\\r\\x07" in line


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("\x1b[2J", "\\x1b[2J"),
        ("a\rb", "a\\rb"),
        ("bell\x07", "bell\\x07"),
        ("csi\x9b31m", "csi\\x9b31m"),
        ("two\nlines", "two\\nlines"),
        ("\u202eevil", "\\u202eevil"),
        ("plain name-1 (ü)", "plain name-1 (ü)"),
    ],
)
def test_printable_shows_each_control_as_its_escape(raw: str, shown: str) -> None:
    assert printable(raw) == shown


def test_printable_keeps_the_lines_of_a_block_costguard_composed() -> None:
    assert printable("title\n\tfield \x1b[31m\r", lines=True) == "title\n\tfield \\x1b[31m\\r"
