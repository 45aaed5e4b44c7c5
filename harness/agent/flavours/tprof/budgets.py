"""TP-O10, tprof's STOP latency, judged only where the guest's clock counts instructions.

seeds-spec §7.1 TP-O10 bounds STOP's latency, "manual mode: STOP returns within 1 s;
auto mode within p + 1 s". That is a wall-clock figure; it is reproducible only in an
input-free run (``-icount shift=0``), where one guest nanosecond is one instruction, as
`harness.agent.oracles.budgets` explains for the core's C-3 (the handler budget every flavour
has, tprof's included)::

    stop_budget_ns(spec)            # 1 000 000 000 (manual drain)
    check_stop_latency(run)         # [] unless STOP took longer

The budget is the spec's figure read as guest time, not a number fitted to a run:
``x_stop_ns`` (the module's own STOP, call to return) ≤ 1 s with manual drain, ≤
drain_ms + 1 s with the periodic one. The port's STOP needs no callout (the seed's TP-D8
wait): it stops the sources, waits for an RCU grace period and swaps each CPU once:
measured 5.9 ms of guest time on one vCPU (5 919 280 ns, idle jumps included) in tprof's
budget scenario. Mutant ``stop_waits`` sleeps 1.5 s first: 1 526 116 880 ns.
"""

from __future__ import annotations

from harness.agent.flavours.tprof.results import TprofRun
from harness.agent.module.spec import AgentSpec
from harness.agent.oracles.laws import at_most
from harness.agent.values.results import Violation

#: seeds-spec §7.1 TP-O10: STOP returns within this much guest time (plus the drain period
#: in auto drain).
STOP_NS = 1_000_000_000


def stop_budget_ns(spec: AgentSpec) -> int:
    """TP-O10's budget: 1 s, plus one drain period when the drain is periodic."""
    return STOP_NS + (0 if spec.drain == "manual" else spec.drain_ms * 1_000_000)


def check_stop_latency(run: TprofRun) -> list[Violation]:
    """TP-O10: the run's STOP returned within its budget of guest time."""
    detail = f"{run.spec.drain} drain: STOP within {stop_budget_ns(run.spec) / 1e9:g} s"
    return at_most("TP-O10", None, "x_stop_ns", bound=stop_budget_ns(run.spec),
                   got=run.counters.stats.get("x_stop_ns", 0), detail=detail)  # fmt: skip
