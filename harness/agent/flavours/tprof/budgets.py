"""Time budgets, judged only where the guest's clock counts instructions: C-3 and TP-O10.

seeds-spec §7 C-3 bounds the overflow handler's cost, "100 µs for burst 1, linear in
burst size"; §7.1 TP-O10 bounds STOP's latency, "manual mode: STOP returns within 1 s;
auto mode within p + 1 s". Both are wall-clock figures, and under TCG a host that
deschedules a vCPU thread stretches any wall-clock interval without bound, so over SSH
these laws could only flake. An input-free run (``invoke repro --deterministic``,
``--record``) runs QEMU with ``-icount shift=0,sleep=off``: the guest's clocks advance
2^0 = 1 ns per instruction retired, and jump over idle time to the next timer. A guest
interval there is a count of instructions (plus timer-driven idle jumps), identical
from run to run, so each budget becomes exact::

    handler_budget_ns(burst=12)     # 1 200 000: 12 calls × 100 000 instructions
    stop_budget_ns(spec)            # 1 000 000 000 (manual drain)
    check_handler_budget(run)       # [] unless a handler took longer

The budgets are the spec's figures read as guest time, not numbers fitted to a run:

* C-3: a handler that makes ``k`` producer calls may take ``k × 100 µs`` (100 000
  instructions each). The handler has no loop but the burst's, so its cost is an
  affine function of ``k``; the spec's per-call figure bounds both parts. The largest
  handler on a CPU made at most ``max(1, n)`` calls, ``n`` being the calls the harness
  injected there in NMI bursts (a burst replaces the overflow's own sample; the sum
  of a CPU's bursts bounds the largest), so ``x_nmi_max_ns ≤ 100 µs × max(1, n)``.
  Measured on one vCPU: a burst of 10 took 2 144 instructions, so the budget is loose
  (it catches a handler ~50 times slower than the port's, not a small regression);
  mutant ``slow_producer`` (500 µs per call) took 5 002 432 against 1 000 000.
* TP-O10: ``x_stop_ns`` (the module's own STOP, call to return) ≤ 1 s with manual
  drain, ≤ drain_ms + 1 s with the periodic one. The port's STOP needs no callout
  (the seed's TP-D8 wait): it stops the sources, waits for an RCU grace period and
  swaps each CPU once: measured 5.9 ms of guest time on one vCPU (5 919 280 ns,
  idle jumps included). Mutant ``stop_waits`` sleeps 1.5 s first: 1 526 116 880 ns.

With several vCPUs, QEMU's round-robin may run another vCPU inside a handler's
interval, whose instructions then count too; the budgets are for runs on one vCPU
(tests/scenarios/test_budgets.py), where they are exact.
"""

from __future__ import annotations

from harness.agent.flavours.tprof.results import SamplingRun
from harness.agent.laws import at_most
from harness.agent.results import Violation
from harness.agent.spec import AgentSpec

#: seeds-spec §7 C-3: the handler's budget per producer call, in guest ns (instructions).
C3_NS_PER_CALL = 100_000
#: seeds-spec §7.1 TP-O10: STOP returns within this much guest time (plus the drain period
#: in auto drain).
STOP_NS = 1_000_000_000


def handler_budget_ns(burst: int) -> int:
    """C-3's budget for a handler that makes ``burst`` producer calls (at least one)."""
    return C3_NS_PER_CALL * max(1, burst)


def stop_budget_ns(spec: AgentSpec) -> int:
    """TP-O10's budget: 1 s, plus one drain period when the drain is periodic."""
    return STOP_NS + (0 if spec.drain == "manual" else spec.drain_ms * 1_000_000)


def check_handler_budget(run: SamplingRun) -> list[Violation]:
    """C-3: per CPU, the slowest handler within 100 µs per call it can have made."""
    out: list[Violation] = []
    for cpu, core in sorted(run.snapshot.core.items()):
        calls = max(1, run.injections.nmi.get(cpu, 0))
        detail = f"≤ {calls} producer calls in one handler, {C3_NS_PER_CALL} ns each"
        out += at_most("C-3", cpu, "x_nmi_max_ns", bound=handler_budget_ns(calls),
                       got=core.get("x_nmi_max_ns", 0), detail=detail)  # fmt: skip
    return out


def check_stop_latency(run: SamplingRun) -> list[Violation]:
    """TP-O10: the run's STOP returned within its budget of guest time."""
    detail = f"{run.spec.drain} drain: STOP within {stop_budget_ns(run.spec) / 1e9:g} s"
    return at_most("TP-O10", None, "x_stop_ns", bound=stop_budget_ns(run.spec),
                   got=run.snapshot.stats.get("x_stop_ns", 0), detail=detail)  # fmt: skip
