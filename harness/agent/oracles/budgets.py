"""C-3, the core's handler budget, judged only where the guest's clock counts instructions.

seeds-spec §7 C-3 bounds the overflow handler's cost, "100 µs for burst 1, linear in
burst size", for every flavour: the handler (``pa_overflow`` in the core) times itself
with the guest's clock and keeps the slowest per CPU (``x_nmi_max_ns``). That is a
wall-clock figure, and under TCG a host that deschedules a vCPU thread stretches any
wall-clock interval without bound, so over SSH the law could only flake. An input-free
run (``invoke repro --deterministic``, ``--record``) runs QEMU with ``-icount
shift=0,sleep=off``: the guest's clocks advance 2^0 = 1 ns per instruction retired, and
jump over idle time to the next timer. A handler's interval there is a count of
instructions, identical from run to run, so the budget judges the same figure every time::

    handler_budget_ns(burst=12)                 # 1 200 000: 12 calls × 100 000 instructions
    check_handler_budget(core, injections)      # [] unless a handler took longer

The budget is the spec's figure read as guest time, not a number fitted to a run: a
handler that makes ``k`` producer calls may take ``k × 100 µs`` (100 000 instructions
each). The handler has no loop but the burst's, so its cost is an affine function of
``k``; the spec's per-call figure bounds both parts. The largest handler on a CPU made
at most ``max(1, n)`` calls, ``n`` being the calls the harness injected there in NMI
bursts (a burst replaces the overflow's own sample; the sum of a CPU's bursts bounds the
largest), so ``x_nmi_max_ns ≤ 100 µs × max(1, n)``.

Each flavour's budget scenario (`harness.agent.flavour.Flavour.budget_scenario`: one
vCPU, one burst of 10 calls, nothing else that overflows) measured, unmutated and with
the core mutant ``slow_producer`` (500 µs of guest time spun after every producer call),
against a budget of 1 000 000 (guest ns, instructions)::

    flavour   unmutated   slow_producer
    tprof         2 160       5 002 416
    dt           14 704       5 014 976
    kprof         4 592       5 004 800
    hwpmc        10 528       5 010 784

The budget is loose (it catches a handler ~70 times slower than the slowest port's,
not a small regression).

With several vCPUs, QEMU's round-robin may run another vCPU inside a handler's
interval, whose instructions then count too; the budget scenarios are one vCPU, where
the figure is the handler's own. Flavour-specific budgets (tprof's STOP latency, TP-O10) live with
their flavour and reuse this module's reading of the clock.
"""

from __future__ import annotations

from collections.abc import Mapping

from harness.agent.oracles.evidence import Injections
from harness.agent.oracles.laws import at_most
from harness.agent.values.results import Violation

#: seeds-spec §7 C-3: the handler's budget per producer call, in guest ns (instructions).
C3_NS_PER_CALL = 100_000


def handler_budget_ns(burst: int) -> int:
    """C-3's budget for a handler that makes ``burst`` producer calls (at least one)."""
    return C3_NS_PER_CALL * max(1, burst)


def check_handler_budget(
    core: Mapping[int, Mapping[str, int]], injections: Injections
) -> list[Violation]:
    """C-3: per CPU, the slowest handler within 100 µs per call it can have made."""
    out: list[Violation] = []
    for cpu, counters in sorted(core.items()):
        calls = max(1, injections.nmi.get(cpu, 0))
        detail = f"≤ {calls} producer calls in one handler, {C3_NS_PER_CALL} ns each"
        out += at_most("C-3", cpu, "x_nmi_max_ns", bound=handler_budget_ns(calls),
                       got=counters.get("x_nmi_max_ns", 0), detail=detail)  # fmt: skip
    return out
