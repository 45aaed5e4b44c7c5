"""One test per matrix cell: the flavour's standard run, judged by its oracles.

tprof: pinned busy loops on every other CPU, the IRQ-off probe on the last CPU,
an idle phase (`SamplingPlan`). dt: busy loops on every CPU with a reader
racing the producers (`DtPlan`). Either way every oracle must hold, and the
cell's per-CPU numbers go into the matrix report.
"""

from __future__ import annotations

import pytest

from harness.agent import profctl as pc
from harness.agent.driver import Agent
from harness.agent.dt_run import DtPlan, dt_run
from harness.agent.flavours import TPROF_DROP_CAUSES
from harness.agent.layouts import DT_EVT
from harness.agent.oracles import check_sampling
from harness.agent.oracles_dt import check_dt
from harness.agent.results import DtRun, SamplingRun
from harness.agent.spec import AgentSpec
from harness.agent.steps import SamplingPlan
from harness.matrix.load import Cell
from tests.matrix.conftest import record_cell

pytestmark = pytest.mark.guest


def test_cell(cell: Cell, cell_agent: Agent, request: pytest.FixtureRequest) -> None:
    cpus = tuple(range(cell.topology.cpus))
    event = "cycles" if cell_agent.cycles_per_ns is not None or cell.accel == "kvm" else "cpu-clock"
    if cell.flavour == "dt":
        dt_plan = DtPlan(body=tuple(pc.spin_step(cpu, 1000) for cpu in cpus),
                         read_size=DT_EVT.size, background_reader=True)  # fmt: skip
        dt = dt_run(cell_agent, AgentSpec(flavour="dt", event=event), dt_plan)
        violations = [str(v) for v in check_dt(dt)]
        record_cell(request, _dt_summary(cell, dt, violations, request.node.nodeid))
    else:
        plan = SamplingPlan(busy_cpus=cpus[::2], probe_cpus=(cpus[-1],), busy_ms=1000)
        run = cell_agent.sampling_run(AgentSpec(event=event), plan)
        violations = [str(v) for v in check_sampling(run)]
        record_cell(request, _tprof_summary(cell, run, violations, request.node.nodeid))
    assert not violations, "\n".join(violations)


def _share(ok: int, total: int) -> float | None:
    return ok / total if total else None


def _tprof_summary(
    cell: Cell, run: SamplingRun, violations: list[str], nodeid: str
) -> dict[str, object]:
    rows = []
    for cpu, core in sorted(run.snapshot.core.items()):
        stats = run.snapshot.stats_percpu.get(cpu, {})
        drops = {name.removeprefix("x_"): stats.get(name, 0) for name, _ in TPROF_DROP_CAUSES}
        rows.append({"cpu": cpu, "overflows": core["x_nmi_total"], "recorded": stats["x_sample"],
                     "merged": core["x_pmu_merged"], "drops": drops,
                     "nmi_share": _share(core["x_nmi_ctx_ok"], core["x_nmi_total"])})  # fmt: skip
    return {"cell": cell.id, "axes": cell.axes(), "nodeid": nodeid, "cpus": rows,
            "violations": violations, "reason": violations[0] if violations else ""}  # fmt: skip


def _dt_summary(cell: Cell, run: DtRun, violations: list[str], nodeid: str) -> dict[str, object]:
    rows = []
    for cpu, stats in sorted(run.after_read.percpu.items()):
        core = run.core.get(cpu, {})
        drops = {"dropevt": stats["dc_dropevt"], "recurevt": stats["dc_recurevt"]}
        rows.append({"cpu": cpu, "overflows": core.get("x_nmi_total", 0),
                     "recorded": stats["x_committed"], "merged": core.get("x_pmu_merged", 0),
                     "drops": drops,
                     "nmi_share": _share(core.get("x_nmi_ctx_ok", 0),
                                         core.get("x_nmi_total", 0))})  # fmt: skip
    return {"cell": cell.id, "axes": cell.axes(), "nodeid": nodeid, "cpus": rows,
            "violations": violations, "reason": violations[0] if violations else ""}  # fmt: skip
