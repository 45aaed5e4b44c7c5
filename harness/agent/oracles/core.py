"""Oracles every flavour shares, balanced against evidence the agent does not produce.

The chain that makes a flavour's conservation law mean something starts here:

* IRQ: the overflows the agent saw equal the PMU interrupts the guest kernel
  handled on that CPU (``/proc/interrupts``, counted before the PMU driver runs).
* CALLS: the flavour's producer ran once per overflow, except that an overflow
  carrying an injected burst runs it once per injected call instead; injections
  are what the harness sent, not what the agent says it received.
* RELEASED (C-4): after STOP the PMU stays quiet: every event was released.
* PEER: where Linux perf sampled the same CPUs with the same event and period
  beside the agent, the overflows the agent saw agree with perf's samples within
  the bound of `harness.agent.peer.counts`'s model.
* PROFILE: beside the same perf, the agent's samples folded by leaf symbol are
  alike perf's (`harness.agent.peer.profile`: chi-square homogeneity, false alarms
  at most 1 in 1000).
* THROTTLE: with throttling off, the perf core throttled nothing (its own mark).
* C-2: no lock taken and no allocation made in NMI context, by two kinds of evidence:
  the agent's checking wrappers' counts, and the built module's call graph from its
  overflow handler, which no wrapper writes (`harness.agent.truth.nmigraph`: a path
  to a lock, an allocator or a sleeping function fails it, wrapped or not).
* C-3: the handler's cost within 100 µs per producer call, judged only where the
  guest's clock counts instructions (`harness.agent.oracles.budgets`).

Periods the emulator never raised as an overflow (``x_periods_undelivered``) are
reported by the tables, with their share; no oracle counts them as accounted::

    view = CoreView(spec, core, kernel, injections, throttling_disabled=True)
    check_core(view)                    # [] when every law holds
    judge_core(view)                    # what each applicable oracle compared (`Judged`)

Each oracle's population is chosen by evidence the agent does not write: IRQ's,
RELEASED's and C-2's are the CPUs the kernel and the core counted on; PEER's the
CPUs perf recorded on; PROFILE's perf's samples in the window (and, paired, the
interrupts both took), never the agent's values under test.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field, replace

from harness.agent.module.spec import AgentSpec
from harness.agent.oracles.budgets import check_handler_budget
from harness.agent.oracles.evidence import Injections, KernelEvidence, RunEvidence
from harness.agent.peer.counts import PeerBound, PeerEvidence, check_peer
from harness.agent.peer.pairing import ProfilePair
from harness.agent.peer.profile import compare, profile_judged, unjudgeable
from harness.agent.truth.nmigraph import NmiGraph
from harness.agent.values.results import Judged, Violation
from harness.errors import ConfigError
from harness.vm.perf import PerfCounts

CORE_ORACLES: tuple[tuple[str, str], ...] = (
    ("IRQ", "overflows seen = PMU interrupts the guest kernel handled, per CPU"),
    ("CALLS", "producer calls = overflows seen - bursts + injected, per CPU and context"),
    ("RELEASED", "no PMU interrupt after STOP: every event released (C-4)"),
    ("PEER", "overflows seen agree with Linux perf's samples beside the agent (model bound)"),
    ("PROFILE", "samples by leaf symbol alike Linux perf's beside the agent (chi-square)"),
    ("THROTTLE", "throttling off: the perf core throttled no event"),
    ("C-2", "no lock taken and no allocation made in NMI context"),
    ("C-3", "handler cost ≤ 100 µs per producer call, in instructions (-icount runs only)"),
)


@dataclass(frozen=True, slots=True)
class CoreView:
    """What the core oracles read of any flavour's run.

    ``core`` is the agent's ``nmi`` file (CPU → counters); ``kernel`` what the guest
    kernel counted around the run (None: not read); ``injections`` what the
    harness's steps injected.
    """

    spec: AgentSpec
    core: Mapping[int, Mapping[str, int]]
    kernel: KernelEvidence | None
    injections: Injections
    throttling_disabled: bool
    #: Linux perf's counts beside the agent, cut to ``peer_window`` (None: no peer ran).
    peer: PerfCounts | None = None
    peer_bound: PeerBound = field(default_factory=PeerBound)
    #: The agent's and perf's profiles of the run (None: no peer with call chains).
    profile: ProfilePair | None = None
    #: The guest's clocks counted instructions (-icount shift=0): time budgets apply.
    instruction_clock: bool = False
    #: What the built module's NMI entry reaches (None: not read): C-2's graph part.
    nmi_graph: NmiGraph | None = None

    @property
    def pmu_interrupts(self) -> bool:
        """Whether overflows arrive as PMU interrupts (not a software clock's timer)."""
        return self.spec.event != "cpu-clock" and self.kernel is not None

    def get(self, cpu: int, name: str) -> int:
        """One core counter (0 on a CPU that has none)."""
        return self.core.get(cpu, {}).get(name, 0)


def applicable_core(view: CoreView) -> frozenset[str]:
    """The core oracles ``view`` can be judged by.

    IRQ and RELEASED need the kernel's counts of PMU interrupts, RELEASED the PMU to
    the agent alone (a peer keeps sampling after STOP); THROTTLE needs throttling
    off (with it on, the throttling test judges the loss itself); PEER a peer; C-3 a
    guest clock that counts instructions (wall-clock budgets would flake under TCG).
    """
    names = {name for name, _ in CORE_ORACLES}
    if not view.pmu_interrupts:
        names -= {"IRQ", "RELEASED"}
    if view.kernel is not None and view.kernel.pmu_shared:
        names.discard("RELEASED")
    if view.peer is None:
        names.discard("PEER")
    if view.profile is None:
        names.discard("PROFILE")
    if not view.throttling_disabled:
        names.discard("THROTTLE")
    if not view.instruction_clock:
        names.discard("C-3")
    return frozenset(names)


def check_core(view: CoreView) -> list[Violation]:
    """Every violation of every core oracle that applies, in `CORE_ORACLES` order."""
    applicable = applicable_core(view)
    return [v for name, _ in CORE_ORACLES if name in applicable for v in _CHECKS[name](view)]


def judge_core(view: CoreView) -> list[Judged]:
    """What each applicable core oracle compared in ``view`` (n = 0: UNJUDGED, with why)."""
    applicable = applicable_core(view)
    cpus = sorted(view.core)
    on = f"on {len(cpus)} CPUs"
    contexts = ("x_producer_calls_nmi", "x_producer_calls_irq", "x_producer_calls_task")
    calls = sum(view.get(cpu, name) for cpu in cpus for name in contexts)
    overflows = sum(view.get(cpu, "x_nmi_total") for cpu in cpus)
    none = "no producer call on any CPU"
    found = [
        Judged("CALLS", calls, f"producer calls {on}, by context, against the steps", why=none),
        Judged("THROTTLE", overflows, f"overflows {on} the perf core could have throttled",
               why="no overflow on any CPU"),
        Judged("C-2", calls, f"producer calls {on} through the checking wrappers", why=none),
        Judged("C-3", calls, f"producer calls {on} timed in instructions", why=none),
    ]  # fmt: skip
    if view.kernel is not None:
        read = [cpu for cpu in cpus if view.kernel.delta(cpu) is not None]
        handled = sum(view.kernel.delta(cpu) or 0 for cpu in read)
        why = "every CPU was offline at a read" if not read else "no PMU interrupt on any CPU"
        found.append(Judged("IRQ", handled, f"PMU interrupts on {len(read)} CPUs, each "
                            "held against the agent's count", why=why))  # fmt: skip
        idle = [cpu for cpu in sorted(set(view.kernel.after) | set(cpus))
                if view.kernel.after_stop(cpu) is not None]  # fmt: skip
        cpu_ms = len(idle) * view.kernel.idle_ms  # the time a stray interrupt could land in
        found.append(Judged("RELEASED", cpu_ms, f"CPU-ms watched for a PMU interrupt after STOP "
                            f"({len(idle)} CPUs read at STOP and {view.kernel.idle_ms} ms later)",
                            why="no CPU read both at STOP and after the idle"))  # fmt: skip
    if view.peer is not None:
        watched = view.peer.watched
        samples = sum(view.peer.cpu(cpu).samples for cpu in watched)
        found.append(Judged("PEER", samples, f"perf samples on {len(watched)} CPUs, each CPU's "
                            "held to the agent's overflows there",
                            why="perf sampled nothing on any CPU it recorded on"))  # fmt: skip
    if view.profile is not None:
        found.append(profile_judged(view.profile))
    if view.nmi_graph is not None:
        found.append(nmi_graph_judged(view.nmi_graph))
    return [j for j in found if j.oracle in applicable]


def nmi_graph_judged(graph: NmiGraph) -> Judged:
    """C-2's graph part: the call sites judged on every path from the NMI entry."""
    unresolved = (f"; {len(graph.unresolved)} indirect not followed: "
                  f"{', '.join(graph.unresolved)}") if graph.unresolved else ""  # fmt: skip
    what = (f"call sites from {graph.entry} in the built module ({len(graph.functions)} "
            f"functions, {len(graph.external)} kernel callees{unresolved})")  # fmt: skip
    return Judged("C-2", graph.calls, what, why=f"{graph.entry} calls nothing", part="graph")


def judge_flavour(view: CoreView, applicable: Collection[str],
                  own: Iterable[Judged]) -> list[Judged]:  # fmt: skip
    """What every applicable oracle of a flavour's table compared.

    The core's as `judge_core` counts them; a flavour's own laws as the flavour counts
    them in ``own``: one `Judged` a law, whose n counts what the law held to its
    equation (producer calls, records, bytes, operations, sweeps), never CPUs alone.

    :raise ConfigError: an applicable law of the flavour's has no count in ``own``.
    """
    core = {name for name, _ in CORE_ORACLES}
    counted = {judged.oracle: judged for judged in own}
    mine = [name for name in sorted(applicable) if name not in core]
    if missing := [name for name in mine if name not in counted]:
        raise ConfigError(f"the flavour's laws {', '.join(missing)} say nothing of what they "
                          "compared: a Judged each, whose n counts events, not CPUs")  # fmt: skip
    return [*judge_core(view), *(counted[name] for name in mine)]


def check_irq(view: CoreView) -> list[Violation]:
    """IRQ: per CPU, x_nmi_total = the kernel's PMU interrupt count over the run.

    Equal when the agent is the only PMU user; with the perf peer beside it an
    interrupt may serve both, so then only ``seen ≤ interrupts`` holds.
    """
    kernel = view.kernel
    if kernel is None:
        return []
    violations = []
    for cpu in sorted(view.core):
        handled = kernel.delta(cpu)
        if handled is None:  # offline at a read: the kernel shows no column then
            continue
        seen = view.get(cpu, "x_nmi_total")
        if seen == handled or (kernel.pmu_shared and seen <= handled):
            continue
        relation = "≤" if kernel.pmu_shared else "="
        detail = f"/proc/interrupts {kernel.label!r} counted by the kernel before the driver ran"
        violations.append(
            Violation("IRQ", cpu, f"x_nmi_total {relation} {handled}", f"{seen}", detail)
        )
    return violations


def check_calls(view: CoreView) -> list[Violation]:
    """CALLS: producer calls follow from overflows seen and the injections sent.

    In the overflow handler's context (NMI, or IRQ without pseudo-NMI) a CPU's
    producer ran ``(x_nmi_total - bursts) + injected`` times with PMU sampling on,
    ``injected`` with it off; in task context exactly the task injections.
    """
    inj = view.injections
    violations = []
    for cpu in sorted(view.core):
        seen, bursts = view.get(cpu, "x_nmi_total"), inj.bursts.get(cpu, 0)
        own = seen - bursts if view.spec.pmu_produce else 0
        want = own + inj.nmi.get(cpu, 0)
        handler = view.get(cpu, "x_producer_calls_nmi") + view.get(cpu, "x_producer_calls_irq")
        if handler != want:
            expected = f"x_producer_calls_nmi + _irq = {own} + injected {inj.nmi.get(cpu, 0)}"
            detail = f"{seen} overflows seen, {bursts} of them carrying a burst"
            violations.append(Violation("CALLS", cpu, expected, f"{handler}", detail))
        task, want_task = view.get(cpu, "x_producer_calls_task"), inj.task.get(cpu, 0)
        if task != want_task:
            detail = "task-context injections sent by the harness"
            violations.append(
                Violation("CALLS", cpu, f"x_producer_calls_task = {want_task}", f"{task}", detail)
            )
    return violations


def check_released(view: CoreView) -> list[Violation]:
    """RELEASED (C-4): no PMU interrupt in the idle window after STOP, on any CPU."""
    kernel = view.kernel
    if kernel is None:
        return []
    detail = f"{kernel.idle_ms} ms after STOP every sampling event must be gone"
    found = ((cpu, kernel.after_stop(cpu)) for cpu in sorted(set(kernel.after) | set(view.core)))
    return [
        Violation("RELEASED", cpu, "0 PMU interrupts", f"{late}", detail)
        for cpu, late in found
        if late
    ]


def check_peer_counts(view: CoreView) -> list[Violation]:
    """PEER: per CPU perf watched, the agent's overflows lie in the model's range of perf's."""
    if view.peer is None:
        return []
    seen = {cpu: view.get(cpu, "x_nmi_total") for cpu in view.core}
    return check_peer(seen, view.peer, bound=view.peer_bound)


def check_profile(view: CoreView) -> list[Violation]:
    """PROFILE: the agent's leaf symbols against perf's, chi-square homogeneity at 1e-3."""
    if view.profile is None:
        return []
    agent, perf = view.profile.agent.leaves(), view.profile.perf.leaves()
    if not sum(perf.values()):
        return []  # perf sampled nothing in the window (or every CPU was thinned: left out)
    left_out = f"; {text}" if (text := view.profile.excluded_text()) else ""
    if not sum(agent.values()):
        return [Violation("PROFILE", None, f"samples beside perf's {sum(perf.values())}",
                          "no agent sample", left_out.removeprefix("; "))]  # fmt: skip
    if unjudgeable(view.profile):
        return []  # too few to judge: the report says so (`harness.agent.peer.run`)
    test = compare(agent, perf)
    if test.passed:
        return []
    n_agent, n_perf = sum(agent.values()), sum(perf.values())
    worst = max(test.categories, key=lambda c: abs(c[1] / n_agent - c[2] / n_perf))
    detail = (f"{len(test.categories)} symbols; most apart: {worst[0]} agent {worst[1]}, "
              f"perf {worst[2]} of {n_agent} / {n_perf}{left_out}")  # fmt: skip
    expected = f"chi2 <= {test.critical:.1f} (df {test.df}, alpha {test.alpha:g})"
    return [Violation("PROFILE", None, expected, f"chi2 = {test.statistic:.1f}", detail)]


def core_view_of(
    run: RunEvidence, core: Mapping[int, Mapping[str, int]], *, throttling_disabled: bool = True
) -> CoreView:
    """What the shared oracles read of a flavour's ``run`` whose core counters are ``core``.

    ``throttling_disabled``: whether the run turned the perf core's throttling off
    (tprof and hwpmc runs say per run; dt's and kprof's always do).
    """
    view = CoreView(spec=run.spec, core=core, kernel=run.kernel, injections=run.injections,
                    throttling_disabled=throttling_disabled,
                    instruction_clock=run.instruction_clock, nmi_graph=run.nmi_graph)  # fmt: skip
    return with_peer(view, run.peer)


def with_peer(view: CoreView, peer: PeerEvidence | None) -> CoreView:
    """``view`` with what Linux perf beside the agent gave (unchanged when no peer ran)."""
    if peer is None:
        return view
    return replace(view, peer=peer.counts, peer_bound=peer.window.bound, profile=peer.profiles)


def check_throttle(view: CoreView) -> list[Violation]:
    """THROTTLE: with throttling off the perf core marked no event throttled."""
    return _must_be_zero(view, "THROTTLE", ("x_throttled",), "throttling disabled")


def check_nmi_safety(view: CoreView) -> list[Violation]:
    """C-2: no lock taken and no allocation made in NMI context, on any CPU.

    The wrappers' counts per CPU, then every path the built module's call graph has
    from the NMI entry to a lock, an allocator or a sleeping function.
    """
    names = ("x_nmi_lock_violation", "x_nmi_alloc_violation")
    found = _must_be_zero(view, "C-2", names, "NMI context must not lock or allocate")
    graph = view.nmi_graph
    reached = graph.forbidden if graph is not None else ()
    return found + [Violation("C-2", None, f"no path from {r.path[0]} to a {r.kind}",
                              f"{r.path[-1]} via {' -> '.join(r.path[:-1])}",
                              "the built module's call graph") for r in reached]  # fmt: skip


def check_nmi_context(core: Mapping[int, Mapping[str, int]], nmi_expected: bool) -> list[Violation]:
    """NMI, shared by the flavours: with pseudo-NMI on every sample was produced in NMI.

    With it on: no overflow handled outside NMI, some handled inside when the agent
    saw any overflow at all, and no producer call in hard-IRQ context on any CPU (the
    harness injects none there: a sample produced later, from an irq_work, is a
    deferral the port must not make; task-context calls are CALLS's to count). A run
    with no overflow (a control run whose one PMC ran 9 ms on a starved host) asks
    nothing of the "some inside" half; IRQ ties "no overflow seen" to the kernel's
    own interrupt count. With it off: nothing ran in NMI.
    """
    view = CoreView(AgentSpec(), core, None, Injections(), throttling_disabled=False)
    if not nmi_expected:
        names = ("x_nmi_ctx_ok", "x_producer_calls_nmi", "x_irqoff_samples")
        return _must_be_zero(view, "NMI", names, "pseudo-NMI off: nothing runs in NMI")
    violations = _must_be_zero(
        view, "NMI", ("x_nmi_ctx_bad", "x_producer_calls_irq"), "pseudo-NMI on: all in NMI"
    )
    seen_any = any(view.get(cpu, "x_nmi_total") > 0 for cpu in core)
    if seen_any and not any(view.get(cpu, "x_nmi_ctx_ok") > 0 for cpu in core):
        violations.append(Violation("NMI", None, "x_nmi_ctx_ok > 0 on some CPU",
                                    "x_nmi_ctx_ok = 0 on every CPU", "pseudo-NMI on"))  # fmt: skip
    return violations


_CHECKS: dict[str, Callable[[CoreView], list[Violation]]] = {
    "IRQ": check_irq,
    "CALLS": check_calls,
    "RELEASED": check_released,
    "PEER": check_peer_counts,
    "PROFILE": check_profile,
    "THROTTLE": check_throttle,
    "C-2": check_nmi_safety,
    "C-3": lambda view: check_handler_budget(view.core, view.injections),
}


def _must_be_zero(
    view: CoreView, oracle: str, names: Iterable[str], detail: str
) -> list[Violation]:
    return [
        Violation(oracle, cpu, f"{name} = 0", f"{name} = {view.get(cpu, name)}", detail)
        for cpu in sorted(view.core)
        for name in names
        if view.get(cpu, name) != 0
    ]
