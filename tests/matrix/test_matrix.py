"""One test per matrix cell: the flavour's standard and peer runs, judged by their oracles.

Each flavour says what its standard run is (`Flavour.standard_run`: tprof runs
pinned busy loops, the IRQ-off probe and an idle phase; dt busy loops with a
reader racing the producers). Every oracle must hold, and the cell's per-CPU
numbers (`Flavour.cell_rows`) go into the matrix report. In the matrices of
`PEER_MATRICES`, where the PMU counts cycles, the flavour's peer run follows (Linux
perf beside the agent: PEER, PROFILE, judged like the standard run) and both profiles
go into the report as folded stacks, drawn there as flame graphs.
"""

from __future__ import annotations

import pytest

from harness.agent.driver import Agent
from harness.agent.flavour import behaviour
from harness.agent.module.spec import AgentSpec
from harness.agent.oracles.report import unjudged, vcpus_share_cores
from harness.agent.peer.counts import PeerEvidence
from harness.agent.peer.profile import profile_summary
from harness.ktap import REPORT_PROPERTY
from harness.matrix.load import Cell
from tests.matrix.conftest import record_cell

pytestmark = pytest.mark.guest

#: Matrices whose cells also run the peer run. Not ``quick`` (every commit, CI): in the
#: fresh-clone CI trial of 13109a5 on this 2-core host, 5 of its 18 cells failed only
#: in their peer runs: dt's drops (since left out of PROFILE), kprof on 8 vCPUs (its
#: calls while a CPU is not yet or no longer tracing thin its profile against perf's
#: whole window: chi2 51.9 against 45.3), hwpmc on 1 vCPU (PEER 1323 against
#: 1363..1423). Until those are fixed at their causes, the peer runs are judged by the
#: mutants' controls and tprof's guest test, and drawn in the full matrix's report.
PEER_MATRICES = ("full",)


def test_cell(cell: Cell, cell_agent: Agent, request: pytest.FixtureRequest) -> None:
    cpus = tuple(range(cell.topology.cpus))
    event = "cycles" if cell_agent.cycles_per_ns is not None or cell.accel == "kvm" else "cpu-clock"
    flavour = behaviour(cell.flavour)
    run = flavour.standard_run(cell_agent, AgentSpec(flavour=cell.flavour, event=event), cpus)
    checked = flavour.check(run)
    violations = [str(v) for v in checked]
    report = f"{cell.flavour} standard run\n{flavour.report(run, checked)}"
    request.node.user_properties.append((REPORT_PROPERTY, report))  # KTAP's subtests
    judged = flavour.judged(run)
    shared = vcpus_share_cores(cell.topology.cpus)  # `Judged.shares_cpu` parts: not relied on
    violations += unjudged(judged, cores_shared=shared)  # nothing compared fails the cell too
    profile: dict[str, str] = {}
    peer_wanted = request.config.getoption("--matrix") in PEER_MATRICES
    if flavour.peer_run is not None and event == "cycles" and peer_wanted:
        peer_run = flavour.peer_run(cell_agent, AgentSpec(flavour=cell.flavour), cpus)
        peer_checked = flavour.check(peer_run)
        violations += [f"peer run: {v}" for v in peer_checked]
        peer_report = f"{cell.flavour} beside Linux perf\n{flavour.report(peer_run, peer_checked)}"
        request.node.user_properties.append((REPORT_PROPERTY, peer_report))
        peer_judged = flavour.judged(peer_run)
        violations += [f"peer run: {why}" for why in unjudged(peer_judged, cores_shared=shared)]
        judged = (*judged, *peer_judged)
        peer = getattr(peer_run, "peer", None)  # every flavour's run keeps perf's evidence
        profile = profile_summary(peer if isinstance(peer, PeerEvidence) else None)
    cells = [row.as_dict() for row in flavour.cell_rows(run)]
    summary = {"cell": cell.id, "axes": cell.axes(), "nodeid": request.node.nodeid,
               "cpus": cells, "violations": violations, "profile": profile,
               "unjudged": sum(1 for j in judged if not j.judged),
               "reason": violations[0] if violations else ""}  # fmt: skip
    record_cell(request, summary)
    assert not violations, "\n".join(violations)
