"""KTAP out of a JUnit file, and the kernel's own parser reading it back (issue 47)."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from harness import ktap
from harness.agent.oracles.report import verdict_lines
from harness.agent.values.results import Judged, Violation
from harness.builder.cache import Cache
from harness.builder.kernel import ensure_source
from harness.cli.ci import StageResult, summary
from harness.cli.testrun import write_ktap
from harness.errors import ConfigError
from harness.scenarios.repro import Verdict, write_bundle_ktap

ORACLES = (("IRQ", "overflows = the kernel's PMU interrupts"), ("WHERE", "where"),
           ("PEER", "beside perf"), ("HW-O8", "stalls"))  # fmt: skip


def _report(title: str, violations: list[Violation], judged: list[Judged]) -> str:
    """An agent report as a guest test attaches it: title, then the verdict lines."""
    lines = verdict_lines(violations, ORACLES, applicable={"IRQ", "WHERE", "HW-O8"},
                          judged=judged)  # fmt: skip
    return f"{title}\ncpu  seen\n  0    12\n{lines}"


PASSED = _report("dt standard run, attempt 1", [],
                 [Judged("IRQ", 412, "overflows"), Judged("WHERE", 40, "samples"),
                  Judged("HW-O8", 8, "sweeps")])  # fmt: skip
FAILED = _report("hwpmc standard run, attempt 1", [Violation("IRQ", 3, "1651", "1470")],
                 [Judged("IRQ", 412, "overflows"),
                  Judged("WHERE", 0, "samples", why="none recorded"),
                  Judged("HW-O8", 8, "sweeps")])  # fmt: skip


def _case(name: str, *, reports: tuple[str, ...] = (), outcome: str = "") -> str:
    properties = "".join(f'<property name="profagent-report" value="{_attr(r)}"/>'
                         for r in reports)  # fmt: skip
    inner = f"<properties>{properties}</properties>" if properties else ""
    if outcome:
        kind, message = outcome.split(":", 1)
        inner += f'<{kind} message="{_attr(message)}">{_attr(message)}</{kind}>'
    return f'<testcase classname="tests.guest.test_content" name="{name}">{inner}</testcase>'


def _attr(text: str) -> str:
    return (text.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;")
            .replace(">", "&gt;").replace("\n", "&#10;"))  # fmt: skip


JUNIT = (
    '<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">'
    + _case("test_every_sample_tells_the_truth[dt]", reports=(PASSED,))
    + _case("test_every_sample_tells_the_truth[hwpmc]", reports=(FAILED,),
            outcome="failure:IRQ cpu 3: expected 1651, got 1470\nWHERE UNJUDGED: samples")
    + _case("test_x86_pmu", outcome="skipped:no PMU under TCG")
    + _case("test_boot_prints_nothing_scary")
    + "</testsuite></testsuites>"
)  # fmt: skip


def test_each_test_case_is_one_test_with_its_runs_and_oracles() -> None:
    tests = ktap.from_junit(JUNIT)
    assert [(t.name.split("::")[-1], t.ok) for t in tests] == [
        ("test_every_sample_tells_the_truth[dt]", True),
        ("test_every_sample_tells_the_truth[hwpmc]", False),
        ("test_x86_pmu", True), ("test_boot_prints_nothing_scary", True)]  # fmt: skip
    (run,) = tests[0].subtests
    assert run.name == "dt standard run, attempt 1"
    assert [(o.name, o.ok, o.directive.split(" ")[0]) for o in run.subtests] == [
        ("IRQ", True, ""),
        ("WHERE", True, ""),
        ("PEER", True, "SKIP"),
        ("HW-O8", True, ""),
    ]
    assert tests[2].directive == "SKIP no PMU under TCG"


def test_a_fail_carries_its_numbers_and_a_relied_on_unjudged_is_not_ok() -> None:
    (run,) = ktap.from_junit(JUNIT)[1].subtests
    oracles = {o.name: o for o in run.subtests}
    assert not oracles["IRQ"].ok
    assert any("1651" in line and "1470" in line for line in oracles["IRQ"].diagnostics)
    assert not oracles["WHERE"].ok  # the test failed naming WHERE UNJUDGED: relied on
    assert oracles["WHERE"].diagnostics == ("UNJUDGED: 0 samples: none recorded",)
    # The same report in a test that passed: the UNJUDGED oracle was not relied on.
    caught, quiet = ktap.verdicts(FAILED.partition("\n")[2], failure="")[:2]
    # ... and its FAIL one the test asserts (a mutant's run it must see caught): XFAIL.
    assert (caught.name, caught.ok, caught.directive.split(" ")[0]) == ("IRQ", True, "XFAIL")
    assert (quiet.ok, quiet.directive) == (
        True,
        "SKIP UNJUDGED, not relied on: 0 samples: none recorded",
    )


def test_the_text_is_ktap_version_1_with_a_plan_at_every_level() -> None:
    text = ktap.render(ktap.from_junit(JUNIT))
    lines = text.splitlines()
    assert lines[:2] == ["KTAP version 1", "1..4"]
    assert "    # Subtest: dt standard run, attempt 1" not in lines  # runs nest two deep
    assert "        # Subtest: dt standard run, attempt 1" in lines
    assert any(line.startswith("        not ok 1 IRQ") for line in lines)  # an oracle
    assert "ok 3 tests.guest.test_content::test_x86_pmu # SKIP no PMU under TCG" in lines
    assert lines[-1] == "ok 4 tests.guest.test_content::test_boot_prints_nothing_scary"


def test_a_hash_in_a_name_or_reason_cannot_start_a_directive() -> None:
    text = ktap.render((ktap.KtapTest("a # b", True, "SKIP why # not"),))
    assert text.splitlines()[-1] == "ok 1 a no. b # SKIP why no. not"


#: Runs the kernel's KTAP parser on a file; prints each top-level test's name and status.
PARSE = """
import json, sys
sys.path.insert(0, sys.argv[1])
import kunit_parser
test = kunit_parser.parse_run_tests(open(sys.argv[2]).read().splitlines())
print(json.dumps([[t.name, t.status.name] for t in test.subtests]))
"""


def kunit_tool() -> Path:
    """The kernel's ``tools/testing/kunit`` of the bench's 6.1 source tree."""
    try:
        source = ensure_source(Cache.default())
    except ConfigError as exc:
        pytest.skip(f"no kernel source to take kunit_parser.py from: {exc}")
    return source / "tools" / "testing" / "kunit"


def kunit_parse(text: str, tmp_path: Path) -> list[tuple[str, str]]:
    """Each top-level test of ``text`` as the kernel's parser reads it: (name, status)."""
    path = tmp_path / "ktap.txt"
    path.write_text(text)
    done = subprocess.run([sys.executable, "-c", PARSE, str(kunit_tool()), str(path)],
                          capture_output=True, text=True, timeout=120, check=True)  # fmt: skip
    return [(name, status) for name, status in json.loads(done.stdout.splitlines()[-1])]


def test_the_kernels_parser_counts_what_the_junit_counts(tmp_path: Path) -> None:
    parsed = kunit_parse(ktap.render(ktap.from_junit(JUNIT)), tmp_path)
    statuses = [status for _, status in parsed]
    counts = {"passed": statuses.count("SUCCESS"), "failed": statuses.count("FAILURE"),
              "skipped": statuses.count("SKIPPED")}  # fmt: skip
    assert counts == ktap.junit_counts(JUNIT)
    cases = ET.fromstring(JUNIT).iter("testcase")
    assert [name.split("::")[-1] for name, _ in parsed] == [c.get("name") for c in cases]


#: A test module whose results span every outcome, each attaching a report as guest tests do.
OUTCOMES = f"""
import pytest
PASSED = {PASSED!r}
FAILED = {FAILED!r}

def test_passes(request):
    request.node.user_properties.append(("profagent-report", PASSED))

def test_fails(request):
    request.node.user_properties.append(("profagent-report", FAILED))
    raise AssertionError("IRQ cpu 3: expected 1651, got 1470")

def test_skips():
    pytest.skip("needs a sanitizer kernel")

@pytest.fixture
def broken():
    raise RuntimeError("the guest did not boot")

def test_errors(broken):
    pass
"""


def test_a_real_pytest_junit_reads_back_with_its_counts(tmp_path: Path) -> None:
    """pytest's own JUnit writer, then `write_ktap`, then the kernel's parser."""
    (tmp_path / "test_outcomes.py").write_text(OUTCOMES)
    junit = tmp_path / "junit.xml"
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                    f"--junitxml={junit}", "--rootdir", str(tmp_path), str(tmp_path)],
                   cwd=tmp_path, capture_output=True, timeout=120, check=False)  # fmt: skip
    text = junit.read_text()
    assert ktap.junit_counts(text) == {"passed": 1, "failed": 2, "skipped": 1}
    written = write_ktap(junit)
    assert written == tmp_path / ktap.FILE
    parsed = dict(kunit_parse(written.read_text(), tmp_path))
    assert {name.split("::")[-1]: status for name, status in parsed.items()} == {
        "test_passes": "SUCCESS", "test_fails": "FAILURE", "test_skips": "SKIPPED",
        "test_errors": "FAILURE"}  # fmt: skip
    assert [n.split("::")[-1] for n in ktap.junit_failures(text)] == ["test_fails", "test_errors"]
    lines = summary([StageResult("static", 0), StageResult("debug", 1, junit)])
    assert lines[0].split() == ["static", "ok"]
    assert lines[1].split() == ["debug", "FAILED", "(exit", "status", "1):", "1", "passed,",
                                "2", "failed,", "1", "skipped"]  # fmt: skip
    assert [line.split()[-1].split("::")[-1] for line in lines[2:]] == ["test_fails", "test_errors"]


def test_a_repro_bundle_has_a_test_per_attempt_and_one_per_expectation(tmp_path: Path) -> None:
    held = Verdict("oracle IRQ holds", True, "0 violations")
    missed = Verdict("TP-O3 fails (TP-D4 reproduces)", False, "0 violations")
    path = write_bundle_ktap(tmp_path, "tp-d4", [[held, held], [held, missed]])
    attempts = ktap.from_attempts("tp-d4", [[(held.expectation, True, "0")]])
    assert attempts[0].subtests[0].name == "oracle IRQ holds"
    assert kunit_parse(path.read_text(), tmp_path) == [
        ("tp-d4 attempt 1", "SUCCESS"), ("tp-d4 attempt 2", "FAILURE")]  # fmt: skip
    assert "    # observed: 0 violations" in path.read_text()  # what the expectation saw


def test_a_failed_test_whose_oracles_all_held_still_counts_a_failed_leaf(tmp_path: Path) -> None:
    """The first tier of b552cda's cold CI: a quirk run's test failed while its report
    held only PASS and XFAIL, and kunit.py's summary counted no failure."""
    junit = ('<testsuites><testsuite name="pytest">'
             + _case("test_hwpmc_stall_independence[quirk-HW-D2]", reports=(PASSED,),
                     outcome="failure:assert 'HW-O8' in {...}")
             + "</testsuite></testsuites>")  # fmt: skip
    (test,) = ktap.from_junit(junit)
    assert [(t.name, t.ok) for t in test.subtests] == [
        ("dt standard run, attempt 1", True), (ktap.ASSERTION, False)]  # fmt: skip
    assert kunit_parse(ktap.render((test,)), tmp_path) == [(test.name, "FAILURE")]
    path = tmp_path / "leaves.txt"
    path.write_text(ktap.render((test,)))
    done = subprocess.run([sys.executable, "-c", LEAVES, str(kunit_tool()), str(path)],
                          capture_output=True, text=True, timeout=120, check=True)  # fmt: skip
    assert json.loads(done.stdout.splitlines()[-1])["failed"] == 1


#: The kernel parser's own summary counts (its leaves), as ``kunit.py parse`` prints them.
LEAVES = """
import json, sys
sys.path.insert(0, sys.argv[1])
import kunit_parser
test = kunit_parser.parse_run_tests(open(sys.argv[2]).read().splitlines())
c = test.counts
print(json.dumps({"passed": c.passed, "failed": c.failed, "skipped": c.skipped}))
"""
