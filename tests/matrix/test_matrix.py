"""One test per matrix cell: the flavour's standard run, judged by its oracles.

Each flavour says what its standard run is (`Flavour.standard_run`: tprof runs
pinned busy loops, the IRQ-off probe and an idle phase; dt busy loops with a
reader racing the producers). Every oracle must hold, and the cell's per-CPU
numbers (`Flavour.cell_rows`) go into the matrix report.
"""

from __future__ import annotations

import pytest

from harness.agent.driver import Agent
from harness.agent.flavour import behaviour
from harness.agent.spec import AgentSpec
from harness.matrix.load import Cell
from tests.matrix.conftest import record_cell

pytestmark = pytest.mark.guest


def test_cell(cell: Cell, cell_agent: Agent, request: pytest.FixtureRequest) -> None:
    cpus = tuple(range(cell.topology.cpus))
    event = "cycles" if cell_agent.cycles_per_ns is not None or cell.accel == "kvm" else "cpu-clock"
    flavour = behaviour(cell.flavour)
    run = flavour.standard_run(cell_agent, AgentSpec(flavour=cell.flavour, event=event), cpus)
    violations = [str(v) for v in flavour.check(run)]
    summary = {"cell": cell.id, "axes": cell.axes(), "nodeid": request.node.nodeid,
               "cpus": flavour.cell_rows(run), "violations": violations,
               "reason": violations[0] if violations else ""}  # fmt: skip
    record_cell(request, summary)
    assert not violations, "\n".join(violations)
