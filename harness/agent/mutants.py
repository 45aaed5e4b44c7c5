"""Mutation controls: the agent builds each oracle must catch, and where they come from.

A mutant is one named sabotage compiled into the agent (``pa_mutant(NAME)`` in
the C). Only the harness's mutation runs select one: `AgentSpec` has no such
field, so no default build, ``invoke agent`` or scenario can. The core's mutants
are here; a flavour's are in its data (`FlavourInfo.mutants`)::

    names()                 # every mutant, core first, then each flavour's
    get("drop_7th_overflow").caught_by      # ('IRQ',)
    for_flavour("dt")       # the core's mutants and dt's own
"""

from __future__ import annotations

from harness.agent import flavours
from harness.agent.info import Mutant
from harness.errors import ConfigError

NONE = "none"  # the unmutated build: every case must pass with it
#: Flavours whose standard run judges MODE, WHO and WHERE; those that record call chains.
CONTENT_FLAVOURS = ("tprof", "kprof", "hwpmc", "dt")
CHAIN_FLAVOURS = ("kprof", "hwpmc", "dt")
CORE_MUTANTS: tuple[Mutant, ...] = (
    Mutant("drop_7th_overflow", "every 7th overflow returns before any counter is touched",
           ("IRQ",)),
    Mutant("skip_producer_7th", "every 7th overflow is counted but skips the producer",
           ("CALLS",)),
    Mutant("leave_event_armed", "the last online CPU's sampling event is never released",
           ("RELEASED",), quick=False),
    Mutant("defer_producer", "every 5th overflow's sample is produced later, from an irq_work",
           ("NMI",)),
    Mutant("nmi_wrapped_trylock", "every 50th producer call tries a lock through the wrapper",
           ("C-2",)),
    Mutant("stretched_period", "the sampling events count period + period/8 events per overflow",
           ("PEER",), case="peer"),
    Mutant("fixed_pc_3rd", "every 3rd sample's PC is replaced by a fixed kernel address",
           ("PROFILE",), case="peer"),
    # The content oracles' (harness.agent.content_oracles): points in the core's pa_produce
    # and pa_chain, judged where a flavour's records reach them.
    Mutant("handler_pc", "every sample records the handler's own PC (_THIS_IP_)",
           ("MODE", "WHERE"), flavours=CONTENT_FLAVOURS),
    Mutant("pid_zero_2nd", "every second sample of a CPU carries pid 0", ("WHO",),
           flavours=CONTENT_FLAVOURS),
    Mutant("flip_mode_7th", "every 7th sample of a CPU has its mode flag inverted", ("MODE",),
           flavours=CONTENT_FLAVOURS),
    Mutant("chain_skip_frame", "every call chain skips its first caller", ("CHAIN",),
           flavours=CHAIN_FLAVOURS),
    Mutant("chain_cut_silent", "every call chain is cut to its PC, not said to be", ("CHAIN",),
           flavours=CHAIN_FLAVOURS),
    Mutant("chain_swap_frames", "every call chain has its second and third callers swapped",
           ("CHAIN",), flavours=CHAIN_FLAVOURS),
    # Only where the record keeps the stop cause (kprof's does not).
    Mutant("chain_end_unsaid", "a walk cut at the depth is counted so but says it ended",
           ("CHAIN",), flavours=("hwpmc", "dt")),
    Mutant("chain_wrong_task", "a user walk starts from the parent task's frame pointer",
           ("CHAIN",), flavours=CHAIN_FLAVOURS),
    Mutant("parent_sample_5th", "every 5th user sample of a CPU is its parent task's PC, pid, tid",
           ("WHO",), flavours=CONTENT_FLAVOURS),
    Mutant("self_throttle", "every 50th overflow stops its own event as perf throttling does",
           ("THROTTLE",)),
    Mutant("nmi_spinlock", "the producer path takes a spinlock in NMI context",
           ("CONSOLE",), case="debug", quick=False),
    Mutant("leak_at_start", "START allocates an object that nothing frees",
           ("KMEMLEAK",), case="debug", quick=False),
    # Judged where the guest's clock counts instructions: each flavour's budget scenario,
    # input-free (`Flavour.budget_scenario`, `harness.agent.budgets`).
    Mutant("slow_producer", "every producer call spins 500 µs of guest time before it returns",
           ("C-3",), case="deterministic"),
)  # fmt: skip


def all_mutants() -> tuple[Mutant, ...]:
    """Every mutant: the core's, then each flavour's in registry order."""
    own = tuple(m for name in flavours.names() for m in flavours.get(name).mutants)
    return (*CORE_MUTANTS, *own)


def names() -> tuple[str, ...]:
    """Every mutant's name (the order of the C enum)."""
    return tuple(m.name for m in all_mutants())


def get(name: str) -> Mutant:
    """The mutant called ``name``.

    :raise ConfigError: no such mutant; the message lists them.
    """
    for mutant in all_mutants():
        if mutant.name == name:
            return mutant
    raise ConfigError(f"unknown mutant {name!r}; known: {', '.join(names())}")


def for_flavour(flavour: str) -> tuple[Mutant, ...]:
    """The mutants a run of ``flavour`` can expose: the core's and its own."""
    name = flavours.get(flavour).name
    core = tuple(m for m in CORE_MUTANTS if not m.flavours or name in m.flavours)
    return (*core, *flavours.get(flavour).mutants)
