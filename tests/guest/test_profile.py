"""PROFILE in the guest tier: every flavour's standard run beside Linux perf.

tprof's peer run has its own test (`tests/guest/test_agent.py`, PEER's per-CPU
counts); this runs the other flavours' (`Flavour.peer_run`: the standard run with
``perf record -g`` on the same CPUs, event and period), so ``invoke test`` prints
each flavour's PEER and PROFILE verdicts and the agent's top symbols beside perf's.
"""

from __future__ import annotations

import pytest

from harness.agent.driver import Agent
from harness.agent.flavour import behaviour
from harness.agent.flavours import names
from harness.agent.spec import AgentSpec
from harness.vm.topology import CpuTopology
from tests.conftest import AGENT_REPORT

pytestmark = pytest.mark.guest


@pytest.mark.parametrize("name", [n for n in names() if n != "tprof"])
def test_every_flavour_profiles_like_linux_perf(
    agent: Agent, topology: CpuTopology, request: pytest.FixtureRequest, name: str
) -> None:
    flavour = behaviour(name)
    assert flavour.peer_run is not None, f"{name} has no run beside Linux perf"
    run = flavour.peer_run(agent, AgentSpec(flavour=name), tuple(range(topology.cpus)))
    violations = flavour.check(run)
    report = flavour.report(run, violations)
    request.node.user_properties.append((AGENT_REPORT, f"{name} beside Linux perf\n{report}"))
    assert not violations, "\n" + "\n".join(str(v) for v in violations) + "\n\n" + report
    assert "PROFILE" in report, report  # the verdict and the top-symbol table are shown
