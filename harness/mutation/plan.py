"""What a mutation campaign runs: the request, each flavour's plan, the plans' lanes.

Pure: nothing is built or booted here. `resolve_selection` looks the request's names
up once, before anything is built, into a `Selection` every group reads. A flavour's
`Plan` is its (build, cases) runs, the control first, and its peer mutants; `shares`
spreads the flavours over at most `LANES` guests, by the runs each makes::

    chosen = resolve_selection(MutationRequest(per_oracle=True))
    plans = {name: flavour_plan(name, full=False, only=chosen.only_for(name))
             for name in chosen.flavours}
    shares(plans, LANES)                       # each flavour on one of the guests
    planned("tprof", full=True, case="debug")  # the mutants one group runs
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.agent import flavours, mutants
from harness.agent.flavour import behaviour
from harness.agent.values.info import Mutant
from harness.agent.witnessed import WITNESS_CASE
from harness.builder.kernel import DEFAULT_KERNEL, KernelChoice
from harness.scenarios.stress import STRESS_CASE

CASES = ("standard", "exact")
#: A flavour's (build, cases) runs, the control first, and its peer mutants.
Plan = tuple[list[tuple[Mutant | None, tuple[str, ...]]], tuple[Mutant, ...]]


@dataclass(frozen=True, slots=True)
class MutationRequest:
    """Which mutants, on how many vCPUs, and where the evidence goes."""

    full: bool = False
    cpus: int = 2
    out: Path | None = None
    flavours: tuple[str, ...] = ()  # only these flavours' runs (empty: every flavour)
    only: tuple[str, ...] = ()  # only these mutants beside the control (empty: all)
    #: CI's share of the quick set: one mutant per oracle (`per_oracle`), not every one
    per_oracle: bool = False
    #: The budget scenarios' cases (`harness.mutation.groups.deterministic_group`); CI
    #: leaves them to tests/scenarios/test_budgets.py, which runs the same cases in the
    #: same CI run
    deterministic: bool = True
    kernel: KernelChoice = DEFAULT_KERNEL  # --kernel / --kernel-src


@dataclass(frozen=True, slots=True)
class Selection:
    """A `MutationRequest`'s names looked up once (`resolve_selection`): what the groups run."""

    flavours: tuple[str, ...]  # the flavours run, in order
    only: tuple[tuple[str, tuple[str, ...]], ...]  # per flavour, the mutants run (() all)
    named: tuple[Mutant, ...]  # the request's ``--mutant`` names, each found (() none named)

    def only_for(self, flavour: str) -> tuple[str, ...]:
        """The mutants ``flavour`` runs beside its control (() all of its set)."""
        return dict(self.only)[flavour]

    def by_flavour(self) -> dict[str, tuple[str, ...]]:
        """`only` as a mapping, for the groups."""
        return dict(self.only)


def resolve_selection(request: MutationRequest) -> Selection:
    """The flavours ``request`` runs, and per flavour the mutants it names (all: ``()``).

    :raise ConfigError: an unknown flavour or mutant (before any build or guest).
    """
    chosen = tuple(flavours.get(name).name for name in request.flavours) or flavours.names()
    named = tuple(mutants.get(name) for name in request.only)
    only = {name: request.only for name in chosen}
    if request.per_oracle:
        only = per_oracle(chosen, full=request.full)
        chosen = tuple(name for name in chosen if only[name])
    return Selection(flavours=chosen, only=tuple((name, only[name]) for name in chosen),
                     named=named)  # fmt: skip


def per_oracle(chosen: Sequence[str], *, full: bool = False) -> dict[str, tuple[str, ...]]:
    """Per flavour, the mutants of the set that show each oracle failing once (CI's share).

    In flavour order, a mutant joins when one of the oracles that must catch it is
    caught by none before it: the shared oracles (IRQ, WHERE, PEER, ...) on the first
    flavour that has a mutant for them, each flavour's own on that flavour. ``invoke
    mutants`` runs the whole set, where every flavour shows every oracle.
    """
    seen: set[str] = set()
    picks: dict[str, tuple[str, ...]] = {}
    for name in chosen:
        mine = []
        for mutant in mutants.for_flavour(name):
            wanted = set(mutant.caught_by) - seen
            if wanted and _runs(mutant, full=full) and mutant.case not in FULL_ONLY_CASES:
                mine.append(mutant.name)
                seen |= wanted
        picks[name] = tuple(mine)
    return picks


#: The cases only the full set runs (their groups boot the debug and sanitizer kernels).
FULL_ONLY_CASES = ("debug", "kasan", "kcsan")


def _runs(mutant: Mutant, *, full: bool) -> bool:
    return (mutant.quick or full) and mutant.name != "leave_event_armed"


def planned(
    flavour: str, *, full: bool, case: str = "standard", only: tuple[str, ...] = ()
) -> tuple[Mutant, ...]:
    """The mutants a group runs for ``flavour`` in ``case``.

    The quick ones (all with ``full``), except the one that leaves its guest unusable;
    with ``only``, just those of them named there.
    """
    return tuple(
        m for m in mutants.for_flavour(flavour)
        if m.case == case and _runs(m, full=full) and (not only or m.name in only)
    )  # fmt: skip


def flavour_plan(name: str, *, full: bool, only: tuple[str, ...]) -> Plan:
    """``name``'s (build, cases) runs, the control first, and its peer mutants."""
    flavour = behaviour(name)
    peer = planned(name, full=full, case="peer", only=only) if flavour.peer_run else ()
    extra = {case: planned(name, full=full, case=case, only=only)
             for case in (*flavour.extra_runs, WITNESS_CASE, STRESS_CASE)}  # fmt: skip
    extra = {case: found for case, found in extra.items() if found}
    plan: list[tuple[Mutant | None, tuple[str, ...]]]
    plan = [(None, (*CASES, *(("peer",) if peer else ()), *extra))]
    plan += [(m, CASES) for m in planned(name, full=full, only=only)]
    plan += [(m, (case,)) for case, found in extra.items() for m in found]
    return plan, peer


#: Guests the default group runs at once, each on its share of the flavours
#: (`harness.lanes`): alone, one 2-vCPU guest kept the two host cores about 60 % busy
#: (CI's per-oracle set: 8 min 23 s). Never more than the host's cores.
LANES = 2


def shares(plans: Mapping[str, Plan], lanes: int) -> list[tuple[str, ...]]:
    """``plans``' flavours shared out among at most ``lanes`` guests, by the runs each makes.

    The heaviest first, each to the lane with the fewest runs so far (a peer run counts
    three: it records beside Linux perf in rounds). No lane is empty.
    """

    def weight(name: str) -> int:
        plan, peer = plans[name]
        return sum(len(cases) for _, cases in plan) + 3 * len(peer)

    loads: list[tuple[int, list[str]]] = [(0, []) for _ in range(min(lanes, len(plans)) or 1)]
    for name in sorted(plans, key=weight, reverse=True):
        index = min(range(len(loads)), key=lambda i: loads[i][0])
        loads[index] = (loads[index][0] + weight(name), [*loads[index][1], name])
    order = list(plans)
    return [tuple(sorted(names, key=order.index)) for _, names in loads if names]


def agent_builds(plans: Mapping[str, Plan]) -> list[tuple[str, Mutant | None]]:
    """The (flavour, mutant) agents the default group's ``plans`` load, the control's too."""
    return [(name, mutant) for name, (plan, peer) in plans.items()
            for mutant in (*(m for m, _ in plan), *peer)]  # fmt: skip
