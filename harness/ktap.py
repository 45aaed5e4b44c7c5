"""KTAP version 1, the format of KUnit and kselftest, for kernel CI labs (KernelCI, LKFT).

Pure: test results in, text out. One KTAP test per guest test (pytest's JUnit
``testcase``), with a subtest per run its agent report names (the report's title:
``dt standard run, attempt 1``) and under it a subtest per oracle verdict line
(`harness.agent.oracles.report.verdict_lines`)::

    tests = from_junit(Path("junit.xml").read_text())
    text = render(tests)              # "KTAP version 1", "1..77", one test a line
    tests = from_attempts("tp-d4", [[("oracle IRQ holds", True, "0")]])  # invoke repro's

How a verdict reads in KTAP:

* ``PASS`` is ``ok``; ``FAIL`` is ``not ok``, its violations as diagnostic lines
  (``# IRQ cpu 3: ...``) before the result line, with the expected and observed numbers;
  in a test that passed, a ``FAIL`` is one the test asserts (a mutant's run that must be
  caught): ``ok ... # XFAIL``;
* ``XFAIL`` (a quirk run reproducing its seed's defect) is ``ok ... # XFAIL`` with the
  defect;
* ``UNJUDGED`` (an oracle that compared nothing) is ``not ok`` where its test relied
  on it (the test failed naming ``ORACLE UNJUDGED``), else ``ok ... # SKIP`` with why;
* ``skip`` (an oracle that does not apply to the run) is ``ok ... # SKIP``.

A pytest skip is ``ok ... # SKIP`` with its reason; an error or failure is ``not ok``
with the first lines of its message as diagnostics. The kernel's own parser
(``tools/testing/kunit/kunit_parser.py``) reads the text back: its top-level tests are
the JUnit's test cases, one for one (its summary counts the leaves, the oracles).
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

#: The file every run writes beside its JUnit, or in its bundle (`invoke repro`).
FILE = "ktap.txt"
#: The property under which a guest test attaches its agent report (tests/conftest.py).
REPORT_PROPERTY = "profagent-report"
#: One verdict line of a report: verdict, oracle, description, (note).
_VERDICT = re.compile(
    r"^(PASS|FAIL|UNJUDGED|XFAIL|skip)\s+(\S+)(?:\s{2,}(.*?))?(?:\s{2}\((.*)\))?$"
)
#: How a failure message lists the UNJUDGED oracles its test relied on.
RELIED = "UNJUDGED, relied on: "
#: The subtest that carries a failed test's own assertion when no oracle of it failed.
ASSERTION = "the test's assertion"
#: Diagnostic lines kept from a failure's message.
MESSAGE_LINES = 12


@dataclass(frozen=True, slots=True)
class KtapTest:
    """One KTAP test: ``ok`` or not, an optional directive, diagnostics, subtests."""

    name: str
    ok: bool
    directive: str = ""  # "SKIP why", "XFAIL why"; "" for none
    diagnostics: tuple[str, ...] = ()
    subtests: tuple[KtapTest, ...] = ()


def _clean(text: str) -> str:
    """A name or reason on one KTAP line: no newline, no ``#`` (it starts a directive)."""
    return " ".join(text.replace("#", "no.").split())


def render(tests: Sequence[KtapTest], *, indent: int = 0) -> str:
    """``tests`` as a KTAP version 1 document (``indent``: nesting depth, 4 spaces each)."""
    return "\n".join(_lines(tests, indent)) + "\n"


def _lines(tests: Sequence[KtapTest], depth: int, name: str | None = None) -> list[str]:
    pad = "    " * depth
    lines = [f"{pad}KTAP version 1"]
    if name is not None:
        lines.append(f"{pad}# Subtest: {_clean(name)}")
    lines.append(f"{pad}1..{len(tests)}")
    for number, test in enumerate(tests, 1):
        if test.subtests:
            lines += _lines(test.subtests, depth + 1, test.name)
        lines += [f"{pad}# {_clean(line)}" for line in test.diagnostics if line.strip()]
        directive = f" # {_clean(test.directive)}" if test.directive else ""
        lines.append(f"{pad}{'ok' if test.ok else 'not ok'} {number} {_clean(test.name)}"
                     f"{directive}")  # fmt: skip
    return lines


def verdicts(report: str, failure: str | None = None) -> tuple[KtapTest, ...]:
    """Each oracle verdict line of one agent ``report``, as a KTAP test.

    ``failure``: the message of the test that attached the report, "" if it passed,
    None if not known. An UNJUDGED oracle it names was relied on, so it is ``not ok``.
    In a test that passed, a ``FAIL`` was one it asserts (a mutant's run, caught): it is
    ``ok ... # XFAIL``.
    """
    found: list[KtapTest] = []
    lines = report.splitlines()
    for index, line in enumerate(lines):
        match = _VERDICT.match(line)
        if match is None:
            continue
        verdict, oracle, description, note = match.groups()
        why = note or description or ""
        follow = []  # its violations: the indented lines right after it
        for after in lines[index + 1 :]:
            if not after.startswith("      ") or _VERDICT.match(after):
                break
            follow.append(after.strip())
        if verdict == "PASS":
            found.append(KtapTest(oracle, True, diagnostics=(note,) if note else ()))
        elif verdict == "FAIL" and failure == "":
            why = "the test passed with it: it asserts this failure (a mutant's run, caught)"
            found.append(KtapTest(oracle, True, f"XFAIL {why}", tuple(follow)))
        elif verdict == "FAIL":
            found.append(KtapTest(oracle, False, diagnostics=(*follow, *([note] if note else []))))
        elif verdict == "XFAIL":
            found.append(KtapTest(oracle, True, f"XFAIL {why}", tuple(follow)))
        elif verdict == "UNJUDGED":
            relied = relied_on(oracle, failure or "")
            if relied:
                found.append(KtapTest(oracle, False, diagnostics=(f"UNJUDGED: {why}",)))
            else:
                found.append(KtapTest(oracle, True, f"SKIP UNJUDGED, not relied on: {why}"))
        else:
            found.append(KtapTest(oracle, True, "SKIP not applicable to this run"))
    return tuple(found)


def relied_on(oracle: str, failure: str) -> bool:
    """Whether a test's ``failure`` names ``oracle`` as UNJUDGED and relied on.

    As `harness.agent.oracles.report.unjudged` says it (``WHERE UNJUDGED: ...``), or in
    a list after `RELIED` (``UNJUDGED, relied on: WHERE, WHO``).
    """
    if f"{oracle} UNJUDGED" in failure:
        return True
    for line in failure.splitlines():
        listed = line.partition(RELIED)[2].split(" (")[0].split(";")[0]
        if oracle in listed.split(", "):
            return True
    return False


def _report_tests(reports: Iterable[str], failure: str) -> tuple[KtapTest, ...]:
    """One subtest per attached report that holds verdict lines, named by its title."""
    found = []
    for report in reports:
        title, _, body = report.partition("\n")
        oracles = verdicts(body, failure)
        if oracles:
            found.append(KtapTest(title or "report", all(t.ok for t in oracles), subtests=oracles))
    return tuple(found)


def _message(element: ET.Element) -> tuple[str, ...]:
    text = element.get("message", "") or (element.text or "")
    lines = [line for line in text.splitlines() if line.strip()]
    return tuple(lines[:MESSAGE_LINES])


def from_junit(xml_text: str) -> tuple[KtapTest, ...]:
    """Every test case of a pytest JUnit file, with its reports' runs and oracles.

    :raise ValueError: the text is not JUnit XML.
    """
    try:
        root = ET.fromstring(xml_text)
    except ET.ParseError as exc:
        raise ValueError(f"not JUnit XML: {exc}") from exc
    found = []
    for case in root.iter("testcase"):
        name = "::".join(p for p in (case.get("classname", ""), case.get("name", "")) if p)
        reports = [p.get("value", "") for p in case.iter("property")
                   if p.get("name") == REPORT_PROPERTY]  # fmt: skip
        failed = case.find("failure")
        if failed is None:
            failed = case.find("error")
        skipped = case.find("skipped")
        failure = "" if failed is None else (failed.get("message", "") + (failed.text or ""))
        subtests = _report_tests(reports, failure)
        if failed is not None and subtests and all(_all_ok(t) for t in subtests):
            # The kernel's parser counts leaves: a failure must be one, or its summary
            # says every test passed (a quirk run whose reports hold only XFAIL and PASS).
            subtests = (*subtests, KtapTest(ASSERTION, False, diagnostics=_message(failed)))
        if failed is not None:
            found.append(KtapTest(name, False, diagnostics=_message(failed), subtests=subtests))
        elif skipped is not None:
            why = skipped.get("message", "") or "skipped"
            found.append(KtapTest(name, True, f"SKIP {why}", subtests=subtests))
        else:
            found.append(KtapTest(name, True, subtests=subtests))
    return tuple(found)


def _all_ok(test: KtapTest) -> bool:
    return test.ok and all(_all_ok(t) for t in test.subtests)


def junit_counts(xml_text: str) -> dict[str, int]:
    """Passed, failed (failures and errors) and skipped test cases of a JUnit file."""
    counts = {"passed": 0, "failed": 0, "skipped": 0}
    for case in ET.fromstring(xml_text).iter("testcase"):
        if case.find("failure") is not None or case.find("error") is not None:
            counts["failed"] += 1
        elif case.find("skipped") is not None:
            counts["skipped"] += 1
        else:
            counts["passed"] += 1
    return counts


def junit_properties(xml_text: str, name: str) -> tuple[str, ...]:
    """Every value of the test-case property ``name`` in a JUnit file, in its order."""
    return tuple(p.get("value", "") for case in ET.fromstring(xml_text).iter("testcase")
                 for p in case.iter("property") if p.get("name") == name)  # fmt: skip


def junit_failures(xml_text: str) -> tuple[str, ...]:
    """The ids (``classname::name``) of a JUnit file's failed test cases, in its order."""
    return tuple(t.name for t in from_junit(xml_text) if not t.ok)


def from_expectations(results: Iterable[tuple[str, bool, str]]) -> tuple[KtapTest, ...]:
    """(expectation, held, observed) of `invoke repro`, one KTAP test each."""
    return tuple(KtapTest(name, held, diagnostics=(f"observed: {seen}",) if seen else ())
                 for name, held, seen in results)  # fmt: skip


def from_attempts(
    scenario: str, attempts: Sequence[Sequence[tuple[str, bool, str]]]
) -> tuple[KtapTest, ...]:
    """A scenario's attempts (`invoke repro`), one KTAP test each, its expectations under it."""
    found = []
    for number, attempt in enumerate(attempts, 1):
        expectations = from_expectations(attempt)
        found.append(KtapTest(f"{scenario} attempt {number}", all(t.ok for t in expectations),
                              subtests=expectations))  # fmt: skip
    return tuple(found)
