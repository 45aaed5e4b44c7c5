"""Every shipped scenario in ``scenarios/`` runs and reproduces all its expectations.

Each one boots its own guest (the scenario says which) and writes a bundle under
``artifacts/repro/``; a failure lists every expectation that did not hold.
``pytest tests/scenarios --kernel 6.12`` replays every scenario that names no other
kernel on that version (the run's request's) instead of its own (issue 26: every scenario on 6.12).
"""

from __future__ import annotations

import os

import pytest

from harness.agent.flavour import behaviour
from harness.agent.overlap import OVERLAP_RUN
from harness.builder.cache import Cache
from harness.cli.session import ResolvedRequest
from harness.scenarios.deterministic_bundle import run_deterministic
from harness.scenarios.load import Scenario, load_all, on_kernel
from harness.scenarios.repro import ReproResult, run_scenario

pytestmark = pytest.mark.guest
SHIPPED = load_all()
#: Guests above this many vCPUs (HW-D1's 33 and 40, hwpmc's oracle runs on 40) run over SSH
#: only with PROFBENCH_LARGE_GUESTS=1: on a 2-core host a 40-vCPU multi-threaded TCG guest takes
#: minutes per run and starves its own RCU. They always run input-free (below).
LARGE_CPUS = 8


def _param(scenario: Scenario) -> object:
    large = pytest.mark.skipif(
        os.environ.get("PROFBENCH_LARGE_GUESTS") != "1",
        reason=f"more than {LARGE_CPUS} vCPUs over SSH: `invoke repro {scenario.name}` runs it "
        "(PROFBENCH_LARGE_GUESTS=1 runs them all here)",
    )
    marks = (large,) if scenario.guest.topology.cpus > LARGE_CPUS else ()
    return pytest.param(scenario, id=scenario.name, marks=marks)


@pytest.mark.parametrize("scenario", [_param(s) for s in SHIPPED])
def test_shipped_scenario_reproduces(
    scenario: Scenario, cache: Cache, run_request: ResolvedRequest
) -> None:
    on_session_kernel = on_kernel(scenario, run_request.kernel.version)
    result = run_scenario(on_session_kernel, cache, repeat=1)
    _assert_held(result)


@pytest.mark.parametrize(
    "scenario", [pytest.param(s, id=s.name) for s in SHIPPED if s.guest.topology.cpus > LARGE_CPUS]
)
@pytest.mark.limit_s(1800)  # 40 vCPUs on one TCG thread: the run's budget is 5 x 2 commands
def test_large_scenario_reproduces_input_free(
    scenario: Scenario, cache: Cache, run_request: ResolvedRequest
) -> None:
    """Every run: under -icount the guest's clocks count instructions, so host load
    cannot starve a 40-vCPU guest's RCU or timers (one TCG thread, about a minute)."""
    on_session_kernel = on_kernel(scenario, run_request.kernel.version)
    result = run_deterministic(on_session_kernel, cache, kind="deterministic", attempts=1)
    _assert_held(result.repro)


def _assert_held(result: ReproResult) -> None:
    failed = [f"{v.expectation}: observed {v.observed}" for v in result.verdicts[0] if not v.held]
    assert not failed, f"bundle {result.bundle}:\n" + "\n".join(failed)


def test_the_shipped_set_covers_the_issue() -> None:
    names = {s.name for s in SHIPPED}
    for wanted in ("tprof-tp-d1-quirk", "tprof-tp-d1-fixed", "tprof-tp-d2-quirk",
                   "tprof-hotplug", "nmi-ab-on", "nmi-ab-off", "tprof-throttling",
                   "dt-d1-quirk-1cpu", "dt-d1-quirk-4cpu",
                   *(f"kprof-kp-{d}-{m}" for d in ("d3", "d7", "d8", "d11")
                     for m in ("quirk", "fixed")),
                   "kprof-kp-o3-qlimit-4cpu",
                   *(f"hwpmc-hw-{d}-{m}" for d in ("d2", "d3", "d4", "d7")
                     for m in ("quirk", "fixed")),
                   "hwpmc-hw-d1-quirk-40cpu", "hwpmc-hw-d1-fixed-40cpu",
                   "hwpmc-hw-d1-quirk-33cpu", "hwpmc-hw-d1-fixed-33cpu",
                   # every hwpmc run but the overlap watch's own (spinners beside, kcsan kernel)
                   *(f"hwpmc-oracles-40cpu-{run}" for run in behaviour("hwpmc").runs
                     if run != OVERLAP_RUN)):  # fmt: skip
        assert wanted in names
