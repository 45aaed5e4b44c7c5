"""``--flavour``: a real pytest run keeps only the named flavours' tests, or stops at once.

The names reach `flavoured.deselect` in the run's request (tests/runrequest.py), resolved
once from the options of a pytest run given no request file.
"""

from __future__ import annotations

import pytest

from harness.cli.session import REQUEST_ENV
from tests.limits import TESTS_ROOT

pytest_plugins = ("pytester",)

PLUGGED = """
from tests import flavoured, runrequest

def pytest_addoption(parser):
    runrequest.add_options(parser)

def pytest_configure(config):
    runrequest.settle(config)  # the names are checked here, once

def pytest_collection_modifyitems(config, items):
    flavoured.deselect(config, items)
"""

TESTS = """
import pytest
from tests.flavoured import each

@pytest.mark.parametrize("name", each(["tprof", "dt", "kprof"]))
def test_shared(name):
    pass

@pytest.mark.flavour("dt")
def test_dt_own():
    pass

def test_no_flavour():
    pass
"""


@pytest.mark.parametrize(
    ("args", "kept"),
    [
        ((), {"test_shared[tprof]", "test_shared[dt]", "test_shared[kprof]", "test_dt_own",
              "test_no_flavour"}),
        (("--flavour", "dt"), {"test_shared[dt]", "test_dt_own"}),
        (("--flavour", "tprof", "--flavour", "kprof"),
         {"test_shared[tprof]", "test_shared[kprof]"}),
    ],
)  # fmt: skip
def test_only_the_named_flavours_tests_are_kept(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, args: tuple[str, ...],
    kept: set[str],
) -> None:  # fmt: skip
    monkeypatch.syspath_prepend(str(TESTS_ROOT.parent))
    monkeypatch.delenv(REQUEST_ENV, raising=False)  # the options, not an outer run's file
    pytester.makeconftest(PLUGGED)
    pytester.makepyfile(test_flav=TESTS)
    result = pytester.runpytest("-p", "no:cacheprovider", "-o", "markers=flavour", "-v", *args)
    result.assert_outcomes(passed=len(kept), deselected=5 - len(kept) or None)
    passed = {line.split("::")[1].split(" ")[0] for line in result.outlines if " PASSED" in line}
    assert passed == kept


def test_an_unknown_flavour_stops_the_run_before_any_test(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(TESTS_ROOT.parent))
    monkeypatch.delenv(REQUEST_ENV, raising=False)  # the options, not an outer run's file
    pytester.makeconftest(PLUGGED)
    pytester.makepyfile(test_flav=TESTS)
    result = pytester.runpytest("-p", "no:cacheprovider", "-o", "markers=flavour",
                                "--flavour", "nope")  # fmt: skip
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--flavour: unknown agent flavour 'nope'; known: dt, hwpmc*"])
