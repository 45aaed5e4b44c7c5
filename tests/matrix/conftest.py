"""The matrix tier: one test per cell of a named matrix in ``tests/matrix.toml``.

``invoke test --matrix quick -n auto`` runs it under pytest-xdist. Each worker
keeps one guest alive at a time, for the cell's arch, topology, NMI mode,
accelerator and kernel variant (cells are sorted so those sharing a guest run
back to back, and grouped with ``xdist_group`` so they share a worker). Each cell
gets a fresh guest restored from a snapshot and the agent deployed into it; with
``--no-snapshot`` the guest is booted cold once and shared by its cells. Every
cell reports a JSON summary; the controller writes ``summary.json`` and
``report.html`` into ``--matrix-report`` when the session ends. ``--flavour NAME``
(repeatable) runs those flavours' cells on the matrix's guests, one found outside the
tree (``--flavour-path``, its entry point) on each of them.

``--matrix``, ``--matrix-report`` and ``--matrix-workers`` are pytest's own options,
read once (`pytest_configure`, into a `MatrixRun`): they say how this pytest run
reports, and ``invoke test --matrix`` names the matrix, not a guest, so there is no
request for them to be part of. The flavours are the run's request's
(tests/runrequest.py), ``--no-snapshot`` the ``snapshots`` fixture's (tests/conftest.py).
"""

from __future__ import annotations

import datetime
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness import arches
from harness.agent.driver import Agent
from harness.agent.module.build import build_agent
from harness.agent.module.spec import AgentSpec
from harness.agent.profctl_build import build_profctl
from harness.builder.cache import Cache
from harness.builder.images import debian_kernel_name, prepare_images
from harness.builder.kernel import KernelChoice
from harness.errors import ConfigError, HarnessError
from harness.matrix.load import Cell, Matrix, get_matrix, with_flavours
from harness.matrix.report import write_html, write_summary
from harness.timeouts import Timeouts
from harness.vm.accel import choose_accel
from harness.vm.argv import MachineSpec
from harness.vm.guest import Guest
from harness.vm.record import new_run_dir
from harness.vm.snapstore import SnapshotStore
from tests import limits, runrequest

CELL_SUMMARY = "matrix-cell"
STARTED = pytest.StashKey[float]()


@dataclass(frozen=True, slots=True)
class MatrixRun:
    """This run's matrix options, read once: the matrix (its flavours' cells) and its report."""

    matrix: Matrix
    report_dir: Path | None  # --matrix-report; None: a new run directory's
    workers: int  # --matrix-workers, for the report only


RUN = pytest.StashKey[MatrixRun]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("profbench-matrix", "profbench matrix runs")
    group.addoption("--matrix", default="quick", help="matrix name in tests/matrix.toml")
    group.addoption("--matrix-report", default=None, help="directory for summary and report")
    group.addoption("--matrix-workers", type=int, default=1, help="for the report only")


@pytest.hookimpl(trylast=True)  # after tests/conftest.py's, which settles the request
def pytest_configure(config: pytest.Config) -> None:
    """Read the matrix options, the only place that does.

    :raise pytest.UsageError: no such matrix.
    """
    config.stash[STARTED] = time.monotonic()
    report = config.getoption("--matrix-report")
    try:
        matrix = with_flavours(get_matrix(config.getoption("--matrix")),
                               runrequest.of(config).flavours)  # fmt: skip
    except ConfigError as exc:
        raise pytest.UsageError(str(exc)) from exc
    config.stash[RUN] = MatrixRun(matrix=matrix, report_dir=Path(report) if report else None,
                                  workers=config.getoption("--matrix-workers"))  # fmt: skip


def chosen_matrix(config: pytest.Config) -> Matrix:
    """``--matrix``'s matrix; with ``--flavour``, those flavours' cells (`with_flavours`)."""
    return config.stash[RUN].matrix


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "cell" in metafunc.fixturenames:
        cells = chosen_matrix(metafunc.config).cells
        metafunc.parametrize("cell", [pytest.param(cell, marks=pytest.mark.flavour(cell.flavour),
                                                   id=cell.id) for cell in cells])  # fmt: skip


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Cells sharing a guest go to one worker, back to back."""
    for item in items:
        cell = _cell_of(item)
        if cell is not None:
            item.add_marker(pytest.mark.xdist_group(cell.guest_key))
    items.sort(key=lambda item: getattr(_cell_of(item), "guest_key", ""))


def _cell_of(item: pytest.Item) -> Cell | None:
    callspec = getattr(item, "callspec", None)
    cell = callspec.params.get("cell") if callspec is not None else None
    return cell if isinstance(cell, Cell) else None


class CellGuests:
    """This worker's guest for the current cell; one runs at a time."""

    def __init__(self, root: Path, timeouts: Timeouts, config: pytest.Config,
                 snapshots: SnapshotStore | None) -> None:  # fmt: skip
        """``snapshots``: the store cells restore from; None (``--no-snapshot``): cold boots."""
        self._cache, self._root, self._timeouts = Cache.default(), root, timeouts
        self._config, self._snapshots = config, snapshots
        self._cells = 0
        self._key: str | None = None
        self._guest: Guest | None = None
        self._agent: Agent | None = None
        self._failure: tuple[str, HarnessError] | None = None

    def agent_for(self, cell: Cell) -> Agent:
        """The deployed agent in a guest for ``cell``, booting it if needed.

        :raise HarnessError: the boot failed (now, or for an earlier cell of this guest).
        """
        if self._failure is not None and self._failure[0] == cell.guest_key:
            raise self._failure[1]
        if self._key != cell.guest_key or self._snapshots is not None:  # fresh per cell
            self.close()
            try:
                self._boot(cell)
            except HarnessError as exc:
                self._failure = (cell.guest_key, exc)
                raise
        assert self._agent is not None
        return self._agent

    @property
    def guest(self) -> Guest | None:
        return self._guest

    def _boot(self, cell: Cell) -> None:
        arch = arches.get(cell.arch)
        accel, _ = choose_accel(arch, cell.accel, self._cache)
        with limits.suspended(self._config):  # builds have budgets of their own
            images = prepare_images(arch, cell.variant, self._cache,
                                    kernel=KernelChoice(cell.kernel))  # fmt: skip
            agent_build = build_agent(AgentSpec(), images, self._cache)
            profctl = build_profctl(arch, self._cache)
        spec = MachineSpec(arch=arch, topology=cell.topology, nmi=cell.nmi, accel=accel)
        timeouts = self._timeouts.for_variant(cell.variant)
        self._cells += 1
        if self._snapshots is None:
            guest = Guest(spec, images, self._root / cell.guest_key, timeouts=timeouts)
            self._guest = guest.__enter__()
        else:
            workdir = self._root / cell.guest_key / f"cell-{self._cells:03d}"
            guest = self._snapshots.start(spec, images, workdir, name=cell.guest_key,
                                          timeouts=timeouts)  # fmt: skip
            self._guest = guest
        self._key = cell.guest_key
        workdir = guest.workdir / "agent"
        workdir.mkdir(parents=True, exist_ok=True)
        self._agent = Agent(guest.shell, agent_build, profctl, workdir, nmi_expected=spec.nmi,
                            pmu_irq_label=arch.pmu_interrupt_label,
                            cycles_per_ns=arch.cycles_per_ns(accel),
                            vmlinux=images.vmlinux)  # fmt: skip
        self._agent.deploy()

    def close(self) -> None:
        guest, self._guest, self._agent, self._key = self._guest, None, None, None
        if guest is not None:
            guest.__exit__(None, None, None)


@pytest.fixture(scope="session")
def cell_guests(
    tmp_path_factory: pytest.TempPathFactory,
    pytestconfig: pytest.Config,
    snapshots: SnapshotStore | None,
) -> Iterator[CellGuests]:
    guests = CellGuests(tmp_path_factory.mktemp("matrix"), Timeouts.from_env(), pytestconfig,
                        snapshots)  # fmt: skip
    try:
        yield guests
    finally:
        guests.close()


@pytest.fixture
def cell_agent(cell: Cell, cell_guests: CellGuests) -> Iterator[Agent]:
    """The agent in this cell's guest; skipped with the reason where the cell cannot run."""
    if cell.accel == "kvm":
        try:
            choose_accel(arches.get(cell.arch), "kvm", Cache.default())
        except ConfigError as exc:
            pytest.skip(f"needs a runner with KVM and a PMU: {exc}")
    agent = cell_guests.agent_for(cell)
    guest = cell_guests.guest
    assert guest is not None
    mark = len(guest.vm.console_text().splitlines())
    yield agent
    if guest.vm.exitcode() is None:
        agent.unload()
    guest.vm.check_console(since_line=mark, what="the guest console during this cell")


def record_cell(request: pytest.FixtureRequest, summary: dict[str, object]) -> None:
    """Attach a cell's summary to its test report (travels from xdist workers)."""
    request.node.user_properties.append((CELL_SUMMARY, json.dumps(summary)))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    if hasattr(config, "workerinput"):  # an xdist worker: the controller writes the report
        return
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None:
        return
    cells = _cell_summaries(config, reporter)
    if not cells:
        return
    run = config.stash[RUN]
    name = run.matrix.name
    out = run.report_dir or new_run_dir("matrix", name)
    out.mkdir(parents=True, exist_ok=True)
    summary_path = write_summary(
        cells,
        out,
        matrix=name,
        started_at=datetime.datetime.now(datetime.UTC).isoformat(),
        wall_s=time.monotonic() - config.stash[STARTED],
        workers=run.workers,
        kernels=_kernel_names(chosen_matrix(config), cells),
    )
    html = write_html(json.loads(summary_path.read_text()), out)
    reporter.write_line(f"matrix {name}: summary {summary_path}; report {html}")


def _cell_summaries(
    config: pytest.Config, reporter: pytest.TerminalReporter
) -> list[dict[str, object]]:
    """One summary per cell: from the test's own record, or built from its outcome."""
    cells = {cell.id: cell for cell in chosen_matrix(config).cells}
    summaries: dict[str, dict[str, object]] = {}
    for outcome in ("passed", "failed", "skipped", "error"):
        for report in reporter.stats.get(outcome, []):
            cell_id = report.nodeid.rsplit("[", 1)[-1].rstrip("]")
            if cell_id not in cells or (report.when != "call" and outcome == "passed"):
                continue
            recorded = [json.loads(v) for k, v in report.user_properties if k == CELL_SUMMARY]
            summary = recorded[0] if recorded else _bare_summary(cells[cell_id], report.nodeid)
            summary["outcome"] = (
                "error" if report.when != "call" and outcome == "failed" else outcome
            )
            if outcome != "passed" and not summary.get("reason"):
                summary["reason"] = _first_line(report)
            summary["duration_s"] = round(report.duration, 2)
            summaries.setdefault(cell_id, summary)
            if outcome in ("failed", "error"):
                summaries[cell_id] = summary
    return [summaries[cid] for cid in cells if cid in summaries]


def _kernel_names(matrix: Matrix, cells: list[dict[str, object]]) -> list[str]:
    """Each kernel the reported cells booted, as reports name it, in cell order."""
    by_id = {cell.id: cell for cell in matrix.cells}
    versions = dict.fromkeys(by_id[str(c["cell"])].kernel for c in cells if c["cell"] in by_id)
    return [debian_kernel_name(version) for version in versions]


def _bare_summary(cell: Cell, nodeid: str) -> dict[str, object]:
    return {"cell": cell.id, "axes": cell.axes(), "nodeid": nodeid, "cpus": [], "violations": []}


def _first_line(report: pytest.TestReport) -> str:
    """The skip reason, or the first ``E`` line of a failure."""
    if isinstance(report.longrepr, tuple):  # a skip: (file, line, reason)
        return str(report.longrepr[2]).removeprefix("Skipped: ")
    lines = str(report.longrepr or "").splitlines()
    errors = [line[1:].strip() for line in lines if line.startswith("E ")]
    return errors[0] if errors else (lines[-1] if lines else "")
