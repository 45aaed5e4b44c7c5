"""Shared test plumbing: options that choose the guest, images, per-worker guest pools.

The guests come from one `ResolvedRequest` (`harness.cli.session`), resolved once a
run (tests/runrequest.py): ``invoke test`` writes it to a file ``$PROFBENCH_REQUEST``
names; a pytest run given none resolves its options (``--cpus``, ``--kernel``,
``--flavour``...) as the CLI does. xdist workers are given the controller's. Tests
read it through the ``run_request`` fixture, hooks through `runrequest.of`. Also
``--no-snapshot``, pytest's own: how this run's pytest restores guests (`snapshots`,
the one place it is read), not which guests; the matrix's cells take it from there.

Guests are restored from their topology's snapshot (saved once, kept in the build
cache; cold boots with ``--no-snapshot``) once per (xdist worker, topology) and
reused, put back to their start state between tests (`harness.vm.pool`). Every
test that uses a topology carries ``xdist_group(<topology>)`` so ``--dist loadgroup``
keeps them on one worker. After each test the guest's console is scanned: a
WARNING or BUG the test provoked fails that test.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness import timing
from harness.agent.driver import Agent
from harness.agent.module.build import AgentBuild, build_agent
from harness.agent.module.spec import AgentSpec
from harness.agent.profctl_build import build_profctl
from harness.agent.steps import throttling_command
from harness.builder.cache import Cache
from harness.builder.images import GuestImages, describe_kernel
from harness.cli import session
from harness.cli.session import ResolvedRequest
from harness.cli.skips import format_skipped, invoke_test_command, skip_reason, skipped_checks
from harness.errors import HarnessError
from harness.ktap import REPORT_PROPERTY
from harness.process import handle_sigterm
from harness.timeouts import Timeouts
from harness.vm.argv import MachineSpec
from harness.vm.guest import Guest
from harness.vm.pool import GuestPool
from harness.vm.record import new_run_dir
from harness.vm.snapstore import SnapshotStore
from harness.vm.topology import CpuTopology
from tests import flavoured, limits, runrequest
from tests.pace import RunPace

SMT_CLUSTER_LAYOUT = session.SMT_CLUSTER_LAYOUT  # in the full set (`session.FULL_SET_CPUS`)
POOLS = pytest.StashKey[list[GuestPool]]()
AGENT_REPORT = REPORT_PROPERTY  # what KTAP reads a run's oracles from (harness.ktap)
DEPLOYED = pytest.StashKey[set[str]]()  # guests (workdir:QEMU pid) the agent is copied into
PMU_EVENTS = pytest.StashKey[dict[str, tuple[frozenset[str], bool]]]()  # by guest, as DEPLOYED
STAGE_TIMES = "profbench-stages"  # a test's seconds per `harness.timing` stage, as JSON
_COUNTED = [timing.totals()]  # the stage totals at the last test's end (this process)


def pytest_addoption(parser: pytest.Parser) -> None:
    runrequest.add_options(parser)  # read once, by `runrequest.settle`
    group = parser.getgroup("profbench", "profbench guest selection")
    group.addoption("--no-snapshot", action="store_true", default=False,
                    help="boot guests cold instead of restoring them from snapshots")  # fmt: skip


def pytest_configure(config: pytest.Config) -> None:
    handle_sigterm()  # SIGTERM unwinds like Ctrl-C, so fixtures stop their guests
    config.stash[POOLS] = []
    runrequest.settle(config)  # an unknown flavour or kernel ends the run here, before a boot
    config.pluginmanager.register(limits, "profbench-limits")  # a scaled limit per test
    config.pluginmanager.register(RunPace(config), "profbench-pace")  # progress of long runs


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: runrequest.WorkerNode) -> None:
    """Give an xdist worker the controller's request: it resolves nothing again."""
    runrequest.hand_to_worker(node)


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, config: pytest.Config
) -> None:
    kernel = f"Linux {describe_kernel(runrequest.of(config).kernel)}"
    lines = [line for pool in config.stash.get(POOLS, []) for line in pool.summary_lines()]
    if lines:
        terminalreporter.section(f"guests on {kernel}")
        for line in lines:
            terminalreporter.write_line(line)
    # Agent reports travel as user properties, so xdist workers' reports arrive too.
    # A failed test's report that its failure message already shows is not shown again.
    reports = [
        (report.nodeid, value)
        for outcome in ("passed", "failed")
        for report in terminalreporter.stats.get(outcome, [])
        if report.when == "call"
        for name, value in report.user_properties
        if name == AGENT_REPORT and not (report.failed and str(value) in report.longreprtext)
    ]
    if reports:
        terminalreporter.section(f"profagent: per-CPU accounting and oracle verdicts on {kernel}")
        for nodeid, text in sorted(reports):
            terminalreporter.write_line(f"\n{nodeid}")
            terminalreporter.write_line(str(text))
    if budget := timing.format_budget(_test_times(terminalreporter)):
        terminalreporter.section("time budget")
        for line in budget:
            terminalreporter.write_line(line)
    skips = [(r.nodeid, skip_reason(r.longrepr)) for r in terminalreporter.stats.get("skipped", [])]
    asked = runrequest.of(config).asked
    if checks := skipped_checks(skips, arch=asked.arch):
        terminalreporter.section("checks that did not run")
        rerun = invoke_test_command(asked, complete=True)
        for line in format_skipped(checks, rerun=rerun):
            terminalreporter.write_line(line)


@pytest.fixture(autouse=True)
def _stage_times(request: pytest.FixtureRequest) -> Iterator[None]:
    """A guest test's stage times, from the last test's end to its own (session fixtures too).

    They travel as a user property, so xdist workers' arrive at the controller.
    """
    yield
    spent = timing.since(_COUNTED[0])
    _COUNTED[0] = timing.totals()
    if request.node.get_closest_marker("guest") is not None:  # a unit test's are fakes'
        request.node.user_properties.append((STAGE_TIMES, json.dumps(spent)))


def _test_times(terminalreporter: pytest.TerminalReporter) -> list[timing.TimedTest]:
    """Every test's wall time (setup, call, teardown) and stage times; [] when none had any."""
    durations: dict[str, float] = {}
    stages: dict[str, dict[str, float]] = {}
    for reports in terminalreporter.stats.values():
        for report in reports:
            if not isinstance(report, pytest.TestReport):
                continue
            durations[report.nodeid] = durations.get(report.nodeid, 0.0) + report.duration
            for name, value in report.user_properties:
                if name == STAGE_TIMES and report.when == "teardown":
                    stages[report.nodeid] = json.loads(str(value))
    if not any(stages.values()):
        return []
    return [timing.TimedTest(nodeid, secs, tuple(stages.get(nodeid, {}).items()))
            for nodeid, secs in durations.items()]  # fmt: skip


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "topology" in metafunc.fixturenames:
        topologies = runrequest.of(metafunc.config).topologies
        metafunc.parametrize("topology", topologies, ids=[t.name for t in topologies])


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Keep ``--flavour``'s tests; group them by topology (xdist_group), each group together.

    The pool keeps one guest per worker, so a topology's tests in a row boot it once.
    """
    flavoured.deselect(config, items)
    ranks: dict[str, int] = {}
    for item in items:
        name = _topology_name(item)
        if name is not None:
            item.add_marker(pytest.mark.xdist_group(name))
            ranks.setdefault(name, len(ranks))
    order = {id(item): index for index, item in enumerate(items)}
    items.sort(key=lambda item: (ranks.get(_topology_name(item) or "", -1), order[id(item)]))


def _topology_name(item: pytest.Item) -> str | None:
    callspec = getattr(item, "callspec", None)
    if callspec is not None and "topology" in callspec.params:
        return str(callspec.params["topology"].name)
    return None


@pytest.fixture(scope="session")
def cache() -> Cache:
    return Cache.default()


@pytest.fixture(scope="session")
def timeouts(run_request: ResolvedRequest) -> Timeouts:
    """The environment's budgets, times the kernel variant's factor (a sanitizer is slower)."""
    return Timeouts.from_env().for_variant(run_request.variant)


@pytest.fixture(scope="session")
def run_request(pytestconfig: pytest.Config) -> ResolvedRequest:
    """This run's guests, resolved once (`runrequest.settle`)."""
    return runrequest.of(pytestconfig)


@pytest.fixture(scope="session")
def base_setup(
    run_request: ResolvedRequest, cache: Cache, pytestconfig: pytest.Config
) -> tuple[MachineSpec, GuestImages]:
    """The first guest's spec (tests replace its topology) and the images, built if need be."""
    with limits.suspended(pytestconfig):  # a build is not the first test's time
        return session.prepare(run_request, cache)


@pytest.fixture(scope="session")
def worker_name(request: pytest.FixtureRequest) -> str:
    worker = getattr(request.config, "workerinput", {}).get("workerid", "main")
    return str(worker)


@pytest.fixture(scope="session")
def run_root(worker_name: str) -> Path:
    """This worker's artifact directory for the whole session."""
    return new_run_dir("pytest", worker_name)


@pytest.fixture(scope="session")
def snapshots(
    cache: Cache, timeouts: Timeouts, pytestconfig: pytest.Config
) -> SnapshotStore | None:
    """This worker's snapshots; None with ``--no-snapshot`` (cold boots)."""
    return None if pytestconfig.getoption("--no-snapshot") else SnapshotStore(cache, timeouts)


@pytest.fixture(scope="session")
def pool(
    base_setup: tuple[MachineSpec, GuestImages], run_root: Path, worker_name: str,
    timeouts: Timeouts, pytestconfig: pytest.Config, snapshots: SnapshotStore | None,
) -> Iterator[GuestPool]:  # fmt: skip
    spec, images = base_setup
    guests = GuestPool(spec, images, run_root, prefix=worker_name, timeouts=timeouts,
                       snapshots=snapshots)  # fmt: skip
    pytestconfig.stash[POOLS].append(guests)
    try:
        yield guests
    finally:
        guests.close()


@pytest.fixture
def guest(
    pool: GuestPool, topology: CpuTopology, request: pytest.FixtureRequest
) -> Iterator[Guest]:
    """The shared running guest for ``topology``; its console is checked after the test.

    A finding names the test (a sanitizer report also its culprit's frame).
    """
    booted = pool.get(topology)
    mark = len(booted.vm.console_text().splitlines())
    yield booted
    booted.vm.check_console(since_line=mark, what=f"the guest console during {request.node.nodeid}")


@pytest.fixture(scope="session")
def agent_build(
    base_setup: tuple[MachineSpec, GuestImages], cache: Cache, pytestconfig: pytest.Config
) -> AgentBuild:
    """The agent rendered with the default spec and built for the session's kernel.

    Runs load it with their own spec's parameters, so one build serves all.
    """
    with limits.suspended(pytestconfig):
        return build_agent(AgentSpec(), base_setup[1], cache)


@pytest.fixture(scope="session")
def profctl_binary(
    base_setup: tuple[MachineSpec, GuestImages], cache: Cache, pytestconfig: pytest.Config
) -> Path:
    with limits.suspended(pytestconfig):
        return build_profctl(base_setup[0].arch, cache)


def agent_in(
    guest: Guest,
    build: AgentBuild,
    profctl_binary: Path,
    request: pytest.FixtureRequest,
    *,
    pmu: tuple[frozenset[str], bool] | None = None,
) -> Agent:
    """``build`` as the agent of ``guest`` for this test (its evidence in the test's workdir).

    Not deployed: `Agent.deploy` copies the module in. ``pmu``: the guest's PMU events,
    where an earlier test read them (`Agent.pmu_events`).
    """
    workdir = guest.workdir / "agent" / request.node.name.replace("/", "_")
    workdir.mkdir(parents=True, exist_ok=True)
    return Agent(
        guest.shell,
        build,
        profctl_binary,
        workdir,
        nmi_expected=guest.spec.nmi,
        pmu_irq_label=guest.spec.arch.pmu_interrupt_label,
        cycles_per_ns=guest.spec.arch.cycles_per_ns(guest.spec.accel),
        vmlinux=guest.images.vmlinux,
        pmu=pmu,
        timeouts=guest.timeouts,  # the variant's: 3 x on kcsan (was Timeouts.from_env's 1 x)
    )


def agent_after_skips(request: pytest.FixtureRequest) -> Agent:
    """The `agent` fixture, asked for by a test once its own skips are decided.

    A test that may skip on this topology or these parameters takes ``request`` instead
    of ``agent`` and calls this after its skips: a skip then restores no guest (0.25 to
    0.6 s each; 35 of them on 8 vCPUs).
    """
    found: Agent = request.getfixturevalue("agent")
    return found


@pytest.fixture
def agent(
    guest: Guest,
    agent_build: AgentBuild,
    profctl_binary: Path,
    request: pytest.FixtureRequest,
    pool: GuestPool,
    topology: CpuTopology,
) -> Iterator[Agent]:
    """The agent deployed in this test's guest; unloaded after the test."""
    if not guest.facts.pmu_driver:
        pytest.skip(
            f"{guest.name} has no PMU (x86 under TCG: 'PMU not available due to "
            "virtualization'); the agent's tests sample the cycles event: they run on "
            "arm64, `invoke test --arch arm64`"
        )
    this_guest = f"{guest.workdir}:{guest.vm.pid}"  # a re-booted guest keeps its workdir
    pmu = request.config.stash.setdefault(PMU_EVENTS, {}).get(this_guest)
    deployed = agent_in(guest, agent_build, profctl_binary, request, pmu=pmu)
    deployed_in = request.config.stash.setdefault(DEPLOYED, set())
    if this_guest not in deployed_in:  # once per guest: the files do not change
        deployed.deploy()
        deployed_in.add(this_guest)
    yield deployed
    if guest.vm.exitcode() is None:
        try:
            request.config.stash[PMU_EVENTS][this_guest] = deployed.pmu_events()  # once a guest
            # The boot's throttling back too, in the unload's round trip: the pool's reset
            # (one round trip either way) then finds nothing to put back or warn about.
            deployed.unload(then="rm -f /tmp/profagent/samples.bin && "
                            + throttling_command(disabled=False))  # fmt: skip
        except HarnessError:
            pool.discard(topology)  # e.g. a hung profctl holds the module: a fresh guest
            raise
