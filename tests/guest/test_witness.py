"""WITNESS in a guest: every sample of every flavour's standard run against what QEMU saw.

`harness.agent.witnessed` runs the flavour's standard run with the emulator's witness
armed on the agent's overflow handler; WITNESS pairs each record with the overflow the
witness saw first and holds every field equal, and the run's own oracles judge it too
(WHERE's model aside: `harness.agent.witnessed.MODELLED_ASIDE`).
"""

from __future__ import annotations

import pytest

from harness.agent import flavours
from harness.agent.driver import Agent
from harness.agent.flavour import behaviour
from harness.agent.oracles.report import unjudged
from harness.agent.witnessed import witnessed_run
from harness.builder.cache import Cache
from harness.vm.guest import Guest
from harness.vm.topology import CpuTopology
from tests.conftest import AGENT_REPORT
from tests.flavoured import each

pytestmark = pytest.mark.guest


@pytest.mark.parametrize("name", each(flavours.names()))
def test_every_sample_is_the_overflow_the_emulator_saw(
    agent: Agent, guest: Guest, cache: Cache, topology: CpuTopology,
    request: pytest.FixtureRequest, name: str,
) -> None:  # fmt: skip
    done = witnessed_run(agent, guest, cache, behaviour(name), range(topology.cpus))
    request.node.user_properties.append((AGENT_REPORT, f"{name} witnessed run\n{done.report}"))
    assert not done.violations, "\n".join(map(str, done.violations))
    # Every part compared something: samples, frames, the kernel's counts, the NMI context,
    # and the witness's own overflows against the ground-truth workload.
    assert unjudged(done.judged, ("WITNESS",)) == [], done.report
    verdict = done.verdict
    # Every record compared, none left over: the witness saw each sample's overflow.
    assert verdict.compared == verdict.samples > 0, done.report
    # Its count per CPU met the kernel's PMU interrupts on every CPU: it missed none.
    assert verdict.interrupts_compared == topology.cpus, done.report
    if flavours.get(name).records_chains:
        assert verdict.frames > 0, done.report
