"""Each option is read in one place: test modules read the run's request, not pytest's options.

The guest options (``--cpus``, ``--kernel``, ``--variant``, ``--flavour``...) are read by
tests/runrequest.py alone, which resolves them once into the run's `ResolvedRequest`;
everything else asks it (`runrequest.of`, the ``run_request`` fixture). Nothing writes
a value back into pytest's options. The options pytest keeps are its own (how this
pytest run restores guests, reports a matrix, times out), each read in the one file
listed here.
"""

from __future__ import annotations

import re

from tests.limits import TESTS_ROOT

#: The files under tests/ (the unit tier aside) that read pytest options, and which.
READERS = {
    "runrequest.py": {"--arch", "--cpus", "--topology", "--variant", "--accel", "--nmi",
                      "--memory-mib", "--append", "--kernel", "--kernel-src", "FLAVOUR_OPTION"},
    "conftest.py": {"--no-snapshot"},  # the `snapshots` fixture: cold boots or restores
    "limits.py": {"timeout"},  # pytest-timeout's --timeout: the user's own limit
    "matrix/conftest.py": {"--matrix", "--matrix-report", "--matrix-workers"},
    "matrix/test_matrix.py": {"--matrix"},  # the matrix's name again: not yet its MatrixRun
}  # fmt: skip
GETOPTION = re.compile(r"getoption\(\s*\"?([\w-]+)\"?")


def reads() -> dict[str, set[str]]:
    """Every ``getoption`` under tests/ (not the unit tier), by file: the options read."""
    found: dict[str, set[str]] = {}
    for path in sorted(TESTS_ROOT.rglob("*.py")):
        name = path.relative_to(TESTS_ROOT).as_posix()
        if name.startswith("unit/"):
            continue
        options = set(GETOPTION.findall(path.read_text()))
        if options:
            found[name] = options
    return found


def test_each_option_is_read_in_one_place() -> None:
    assert reads() == READERS


def test_nothing_is_written_back_into_pytests_options() -> None:
    writers = [path.relative_to(TESTS_ROOT).as_posix() for path in TESTS_ROOT.rglob("*.py")
               if not path.is_relative_to(TESTS_ROOT / "unit")
               and re.search(r"config\.option\b|vars\(\w*config", path.read_text())]  # fmt: skip
    assert writers == []
