"""A flavour that lives outside the tree, the whole round trip, so that it cannot rot.

`invoke new-flavour`'s package is written into the test's own directory, found as
``--flavour-path`` finds it (`harness.agent.external.use_flavours`), built into the
agent beside the four in-tree flavours and deployed into the guest. Its standard run
beside Linux perf must pass every shared oracle that applies (IRQ, CALLS, NMI, THROTTLE,
C-2, MODE, WHO, WHERE, CHAIN, PEER, PROFILE) and its own, each having compared
something; its exact run RELEASED and its conservation law with the numbers known
before the run; and its own mutant, a drop counted nowhere, must be caught by that law.
One test, two runs: the tier's time (a standard run and a peer run were 13 s and 15 s
on 8 vCPUs in two tests) goes to the one run that judges both. A flavour found outside
(``invoke test --flavour NAME --flavour-path DIR``) runs the shared tests instead
(`tests.flavoured`) and its exact run here, and this one is not among them. The
session's module is put back in the guest afterwards, and the registry forgets the
flavour: the tests after this see the bench as it was.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness.agent import flavours
from harness.agent.driver import Agent
from harness.agent.external import use_flavours
from harness.agent.flavour import AgentRun, Flavour, behaviour
from harness.agent.flavours.discovery import PATH_ENV
from harness.agent.module.build import AgentBuild, build_agent
from harness.agent.module.spec import AgentSpec
from harness.agent.oracles.report import unjudged, vcpus_share_cores
from harness.agent.scaffold import new_flavour
from harness.agent.steps import GUEST_DIR
from harness.builder.cache import Cache
from harness.builder.images import GuestImages
from harness.vm.guest import Guest
from harness.vm.topology import CpuTopology
from tests.conftest import AGENT_REPORT, agent_in
from tests.flavoured import each
from tests.guest.verdicts import failure_message, uncounted

pytestmark = pytest.mark.guest
#: The scaffolded flavour's name: the same in every run, so its build is cached.
NAME = "outside"


@dataclass(frozen=True, slots=True)
class Outside:
    """The scaffolded flavour in this test's guest: its behaviour, its agent, the images."""

    flavour: Flavour
    agent: Agent
    guest: Guest
    images: GuestImages


@pytest.fixture(scope="session")
def scaffolded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`invoke new-flavour`'s package for `NAME`, written once per test process.

    Once: its template directory and modules, once found, stay this process's.
    """
    return new_flavour(NAME, tmp_path_factory.mktemp("outside") / NAME).out


@pytest.fixture
def outside(
    guest: Guest,
    agent_build: AgentBuild,
    profctl_binary: Path,
    scaffolded: Path,
    *,
    cache: Cache,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Outside]:
    """Find, build and deploy flavour `NAME`; afterwards the session's module again."""
    if not guest.facts.pmu_driver:
        pytest.skip(
            f"{guest.name} has no PMU (x86 under TCG); the agent's tests sample the cycles "
            "event: they run on arm64, `invoke test --arch arm64 -k scaffolded_flavour`"
        )
    monkeypatch.setattr(flavours, "_OUTSIDE", flavours._Outside())  # forgotten afterwards
    monkeypatch.delenv(PATH_ENV, raising=False)
    assert use_flavours([scaffolded]) == (NAME,)
    build = build_agent(AgentSpec(flavour=NAME), guest.images, cache)
    agent = agent_in(guest, build, profctl_binary, request)
    agent.deploy()
    try:
        yield Outside(behaviour(NAME), agent, guest, guest.images)
    finally:
        if guest.vm.exitcode() is None:
            agent.unload(then="rm -f /tmp/profagent/samples.bin")
            guest.shell.put(agent_build.ko, f"{GUEST_DIR}/profagent.ko")  # the session's


def held(flavour: Flavour, run: AgentRun, request: pytest.FixtureRequest, title: str) -> str:
    """Assert every oracle that applies held; the report (kept in the test's summary)."""
    violations = flavour.check(run)
    report = flavour.report(run, violations)
    request.node.user_properties.append((AGENT_REPORT, f"{title}\n{report}"))
    assert not violations, failure_message(report, violations, [])
    return report


def compared(flavour: Flavour, run: AgentRun, report: str, relied: tuple[str, ...] | None,
             vcpus: int) -> None:  # fmt: skip
    """Assert each oracle of ``relied`` (None: every applicable one) compared something."""
    missing = unjudged(flavour.judged(run), relied, cores_shared=vcpus_share_cores(vcpus))
    assert not missing, failure_message(report, [], missing)


@pytest.mark.limit_s(1500)  # a module build, two runs (one beside perf) and a mutant's build
def test_a_scaffolded_flavour_is_judged_by_every_shared_oracle(
    outside: Outside, topology: CpuTopology, request: pytest.FixtureRequest, cache: Cache
) -> None:
    flavour, agent, cpus = outside.flavour, outside.agent, tuple(range(topology.cpus))
    # Its standard run beside Linux perf: the content oracles, PEER and PROFILE in one run.
    assert flavour.peer_run is not None
    run = flavour.peer_run(agent, AgentSpec(flavour=NAME), cpus)
    report = held(flavour, run, request, f"{NAME} (scaffolded) beside Linux perf")
    compared(flavour, run, report, None, len(cpus))  # every applicable one compared something
    shared = {"IRQ", "CALLS", "THROTTLE", "C-2", "NMI", "MODE", "WHO", "WHERE", "CHAIN"}
    assert shared | {"PEER", "PROFILE", "OUTSIDE-O1", "OUTSIDE-O2"} <= flavour.applicable(run)
    numbers = run.numbers()
    assert numbers[f"content.chain.cpu{topology.cpus - 1}.population"] > 0, report
    assert sum(numbers[f"percpu.{c}.x_recorded"] for c in cpus) > 0, report

    # RELEASED needs the PMU to the agent alone (perf keeps sampling after STOP): here.
    exact = flavour.exact_run(agent, AgentSpec(flavour=NAME), cpus)
    report = held(flavour, exact, request, f"{NAME} (scaffolded) exact run")
    relied = ("IRQ", "CALLS", "RELEASED", "OUTSIDE-O1", "OUTSIDE-O2", "MODE")
    compared(flavour, exact, report, relied, len(cpus))
    found = exact.numbers()
    full = {c: found[f"percpu.{c}.x_drop_full"] for c in cpus}
    assert full == {c: 4 + (3 if c == cpus[0] else 0) for c in cpus}, report  # 20 into 16

    # Broken on purpose: the port's own sabotages, a drop counted nowhere and one counted
    # under the wrong cause, are caught by its own law in the same run (20 calls, 16
    # recorded: the 4 full drops uncounted, or counted as nested, which the sum of the
    # causes alone would let through).
    for sabotage in ("uncounted_drop", "full_as_nested"):
        broken = build_agent(AgentSpec(flavour=NAME), outside.images, cache,
                             mutant=f"{NAME}_{sabotage}")  # fmt: skip
        agent.unload()
        outside.guest.shell.put(broken.ko, f"{GUEST_DIR}/profagent.ko")
        mutated = agent_in(outside.guest, broken, agent.profctl_binary, request)
        run = flavour.exact_run(mutated, AgentSpec(flavour=NAME), cpus)
        caught = flavour.check(run)
        request.node.user_properties.append(
            (AGENT_REPORT, f"{NAME} (scaffolded) exact run, mutant {broken.rendered.mutant}\n"
                           f"{flavour.report(run, caught)}")
        )  # fmt: skip
        assert {v.oracle for v in caught} == {"OUTSIDE-O1"}, flavour.report(run, caught)
        mutated.unload()


@pytest.mark.parametrize("name", each(flavours.outside()))
def test_a_port_found_outside_holds_its_laws_in_its_exact_run(
    agent: Agent, topology: CpuTopology, request: pytest.FixtureRequest, name: str
) -> None:
    """``invoke test --flavour NAME --flavour-path DIR``: the port's exact run, too.

    The shared tests judge its standard run; a full ring, and a drop counted nowhere or
    under the wrong cause, show only where the harness overfills its rings and knows
    every count (issue 44: a port's full-ring mistakes passed ``invoke test --flavour``).
    Each count oracle must have compared something (`tests.guest.verdicts.uncounted`).
    In-tree flavours' own tests run their exact runs.
    """
    flavour, cpus = behaviour(name), tuple(range(topology.cpus))
    run = flavour.exact_run(agent, AgentSpec(flavour=name), cpus)
    violations = flavour.check(run)
    report = flavour.report(run, violations)
    request.node.user_properties.append((AGENT_REPORT, f"{name} exact run\n{report}"))
    missing = uncounted(flavour, run, topology.cpus)
    assert not [*violations, *missing], failure_message(report, violations, missing)
