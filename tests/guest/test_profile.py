"""PROFILE in the guest tier: every flavour's standard run beside Linux perf.

tprof's peer run has its own test (`tests/guest/test_agent.py`, PEER's per-CPU
counts); this runs the other flavours' (`Flavour.peer_run`: the standard run with
``perf record -g`` on the same CPUs, event and period), so ``invoke test`` prints
each flavour's PEER and PROFILE verdicts and the agent's top symbols beside perf's
(dt's and hwpmc's PROFILE compare the samples of the interrupts both took:
`harness.agent.peer.profile`, "Paired profiles"). A run whose PROFILE compared too few
samples to judge (`MIN_COMPARED` a side) fails: it judged nothing.
"""

from __future__ import annotations

import os

import pytest

from harness.agent.driver import Agent
from harness.agent.flavour import behaviour
from harness.agent.flavours import names
from harness.agent.module.spec import AgentSpec
from harness.agent.oracles.report import unjudged
from harness.agent.peer.counts import PeerEvidence
from harness.agent.peer.profile import unjudgeable
from harness.vm.topology import CpuTopology
from tests.conftest import AGENT_REPORT, SMT_CLUSTER_LAYOUT
from tests.flavoured import each
from tests.guest.verdicts import failure_message

pytestmark = pytest.mark.guest


@pytest.mark.parametrize("name", each(n for n in names() if n != "tprof"))
def test_every_flavour_profiles_like_linux_perf(
    agent: Agent, topology: CpuTopology, request: pytest.FixtureRequest, name: str
) -> None:
    if topology.name == SMT_CLUSTER_LAYOUT and os.environ.get("PROFBENCH_SLOW") != "1":
        # 6.5 min of a CI worker's time for three runs that 2s2cl1c2t's 8 vCPUs already
        # show: a profile does not depend on how the vCPUs are spread.
        pytest.skip(
            "slow on the SMT/cluster layout, covered by 8 vCPUs: "
            "`PROFBENCH_SLOW=1 invoke test --topology 1s2cl2c2t -k profiles_like`"
        )
    flavour = behaviour(name)
    assert flavour.peer_run is not None, f"{name} has no run beside Linux perf"
    run = flavour.peer_run(agent, AgentSpec(flavour=name), tuple(range(topology.cpus)))
    violations = flavour.check(run)
    report = flavour.report(run, violations)
    request.node.user_properties.append((AGENT_REPORT, f"{name} beside Linux perf\n{report}"))
    assert not violations, failure_message(report, violations, [])
    assert "PROFILE" in report, report  # the verdict and the top-symbol table are shown
    peer = getattr(run, "peer", None)  # every flavour's peer run keeps perf's evidence
    assert isinstance(peer, PeerEvidence), report
    assert peer.profiles is not None, report
    assert not unjudgeable(peer.profiles), f"PROFILE judged nothing\n{report}"
    missing = unjudged(flavour.judged(run), ("PEER", "PROFILE"))
    assert not missing, failure_message(report, [], missing)
