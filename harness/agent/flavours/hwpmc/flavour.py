"""hwpmc's behaviour for the shared machinery (`harness.agent.flavour.Flavour`).

The standard run is one SS PMC per online CPU under pinned busy loops, swept by
the timer; the exact run suppresses the sweeps, fills every ring with injected
bursts, restarts by a kick and releases with entries in the rings. Scenarios run
their steps while one SS PMC per online CPU runs; hwpmc's own op is ``pending``
(the next entry on a CPU stays pending: HW-D3's hook).
"""

from __future__ import annotations

from collections.abc import Sequence

from harness.agent.flavour import AgentLike, AgentRun, Flavour, OpRule, Script, narrow, typed
from harness.agent.flavours.hwpmc.data import HWPMC
from harness.agent.flavours.hwpmc.oracles import HW_ORACLES, applicable_hw_oracles, check_hwpmc
from harness.agent.flavours.hwpmc.plans import exact_plan, exact_spec, standard_plan
from harness.agent.flavours.hwpmc.report import format_hw_table, format_hw_verdicts, hw_rows
from harness.agent.flavours.hwpmc.results import HwRun
from harness.agent.flavours.hwpmc.run import HwPlan, PmcSpec, hw_run, pending_step
from harness.agent.results import Violation
from harness.agent.spec import AgentSpec


def _report(run: AgentRun, violations: Sequence[Violation]) -> str:
    own = narrow(run, HwRun)
    return f"{format_hw_table(own)}\n{format_hw_verdicts(violations, applicable_hw_oracles(own))}"


def _standard(agent: AgentLike, spec: AgentSpec, cpus: tuple[int, ...]) -> AgentRun:
    return hw_run(agent, spec, standard_plan(cpus))


def _exact(agent: AgentLike, spec: AgentSpec, cpus: tuple[int, ...]) -> AgentRun:
    exact = exact_spec(spec)
    return hw_run(agent, exact, exact_plan(cpus, exact.param("nsamples")))


def _script(agent: AgentLike, spec: AgentSpec, script: Script) -> AgentRun:
    cpus = agent.online_cpus()
    plan = HwPlan(
        kind="script",
        pmcs=tuple(PmcSpec("SS", (cpu,)) for cpu in cpus),
        body=tuple((step, "") for step in script.body),
    )
    return hw_run(agent, spec, plan)


def _cell_rows(run: AgentRun) -> list[dict[str, object]]:
    own = narrow(run, HwRun)
    return [
        {
            "cpu": r["cpu"],
            "irq": r["irq"],
            "overflows": r["seen"],
            "recorded": r["recorded"],
            "undelivered": r["undelivered"],
            "drops": {"bufferfull": r["bufferfull"], "stalled_nmi": r["stalled_nmi"]},
            "nmi_share": None if r["nmi_pct"] is None else float(str(r["nmi_pct"])) / 100,
        }
        for r in hw_rows(own)
    ]


FLAVOUR = Flavour(
    info=HWPMC,
    oracles=HW_ORACLES,
    check=typed(HwRun, check_hwpmc),
    applicable=typed(HwRun, applicable_hw_oracles),
    report=_report,
    standard_run=_standard,
    exact_run=_exact,
    run_script=_script,
    cell_rows=_cell_rows,
    ops={"pending": OpRule(cpu="one", count_max=1)},
    op_steps={"pending": pending_step},
)
