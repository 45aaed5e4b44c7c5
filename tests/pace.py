"""How far a long test run is: every tenth of the tests, the fraction done and the time left.

Registered as a plugin by ``tests/conftest.py``. A guest tier or a matrix runs for
many minutes; pytest's dots say nothing about how many remain. Once a run has
lasted a minute, at every tenth of its tests it writes::

    progress: 12/40 tests (30%), about 9 min 20 s left (at the pace so far)

Under pytest-xdist the controller counts the reports its workers send (one per
test's teardown), and the total is what the workers collected.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import pytest

from harness.progress import Progress, format_progress, report_now


class RunPace:
    """Counts finished tests and reports the pace on the terminal."""

    def __init__(self, config: pytest.Config) -> None:
        self._config = config
        self._worker = hasattr(config, "workerinput")  # workers' terminals are not shown
        self._started = time.monotonic()
        self.total = 0
        self.done = 0

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.total = len(session.items)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: object, ids: Sequence[str]) -> None:
        self.total = max(self.total, len(ids))  # every worker collects the whole run

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if self._worker or report.when != "teardown":
            return
        self.done += 1
        elapsed_s = time.monotonic() - self._started
        if not report_now(self.done, self.total, elapsed_s):
            return
        progress = Progress(self.done, self.total, elapsed_s, basis="at the pace so far",
                            unit="tests")  # fmt: skip
        reporter = self._config.pluginmanager.get_plugin("terminalreporter")
        if reporter is None:
            return
        reporter.ensure_newline()  # ends a line that began with a file's path
        if reporter._tw.width_of_current_line:  # a line of bare dots (-q, xdist)
            reporter._tw.line()
        reporter.write_line(f"progress: {format_progress(progress)}")
