"""Mutation testing: the sabotages compiled into the agent, and which oracles caught them.

A mutant is one named sabotage compiled into the agent (``pa_mutant(NAME)`` in
the C). Only the harness's mutation runs select one: `AgentSpec` has no such
field, so no default build, ``invoke agent`` or scenario can. The core's mutants
are here; a flavour's are in its data (`FlavourInfo.mutants`)::

    names()                 # every mutant, core first, then each flavour's
    get("drop_7th_overflow").caught_by      # ('IRQ',)
    for_flavour("dt")       # the core's mutants and dt's own

A mutation run's verdicts are pure values here too; the runs themselves (guests,
builds) are `harness.mutation`. A mutant is caught when every oracle it names
(`Mutant.caught_by`) failed in at least one of its cases; the unmutated build
(``none``) must pass every case, or no catch means anything::

    rows = (MutantRow("drop_7th_overflow", "tprof", ("IRQ",), ("IRQ",), ("standard",)),)
    print(format_table(rows))
    survivors(rows)                  # [] when every mutant was caught and the control passed
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from harness.agent import flavours
from harness.agent.values.info import Mutant
from harness.agent.values.results import UNJUDGED
from harness.agent.values.table import align
from harness.errors import ConfigError

NONE = "none"  # the unmutated build: every case must pass with it


def unjudged_token(oracle: str) -> str:
    """How a mutation run names an oracle it relied on that compared nothing.

    ``PROFILE:UNJUDGED`` among a run's failures: the guest test that relies on PROFILE
    fails on it (`harness.agent.oracles.report.unjudged`), so a mutant whose sabotage leaves
    nothing to compare is caught by it, and a control that shows it is broken.
    """
    return f"{oracle}:{UNJUDGED}"


def unjudged_oracle(token: str) -> str | None:
    """The oracle an `unjudged_token` names (None: ``token`` is an oracle's own name)."""
    oracle, _, tail = token.partition(":")
    return oracle if tail == UNJUDGED else None


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
    # A port's mistake no wrapper counts (issue 44): caught by C-2's call graph of the
    # built module, on any kernel (the debug kernel's lockdep is nmi_spinlock's judge).
    Mutant("nmi_plain_lock", "every producer call takes a plain spin_lock, as a seed's spin "
           "mutex ported as is", ("C-2",)),
    # The same lock through a pointer set at load: the call graph cannot follow it (an
    # indirect call not followed); the debug kernel's function_graph from the NMI entry
    # sees the call (harness.agent.truth.nmitrace), and lockdep may.
    Mutant("nmi_lock_via_pointer", "every producer call takes a plain spin_lock through a "
           "function pointer set at load", ("C-2",), case="debug", quick=False),
    Mutant("stretched_period", "the sampling events count period + period/8 events per overflow",
           ("PEER",), case="peer"),
    Mutant("fixed_pc_3rd", "every 3rd sample's PC is replaced by a fixed kernel address",
           ("PROFILE",), case="peer"),
    # The content oracles' (harness.agent.oracles.content): points in the core's pa_produce
    # and pa_chain, judged on every flavour's standard run (its samples carry CPU, PC, pid
    # and mode); those that need more of a sample say so (`Mutant.needs`).
    Mutant("handler_pc", "every sample records the handler's own PC (_THIS_IP_)",
           ("MODE", "WHERE")),
    Mutant("pid_zero_2nd", "every second sample of a CPU carries pid 0", ("WHO",)),
    Mutant("flip_mode_7th", "every 7th sample of a CPU has its mode flag inverted", ("MODE",)),
    Mutant("chain_skip_frame", "every call chain skips its first caller", ("CHAIN",),
           needs=("records_chains",)),
    Mutant("chain_cut_silent", "every call chain is cut to its PC, not said to be", ("CHAIN",),
           needs=("records_chains",)),
    Mutant("chain_swap_frames", "every call chain has its second and third callers swapped",
           ("CHAIN",), needs=("records_chains",)),
    # Only where the record keeps the stop cause (kprof's does not).
    Mutant("chain_end_unsaid", "a walk cut at the depth is counted so but says it ended",
           ("CHAIN",), needs=("records_chain_stop",)),
    Mutant("chain_wrong_task", "a user walk starts from the parent task's frame pointer",
           ("CHAIN",), needs=("records_chains",)),
    Mutant("parent_sample_5th", "every 5th user sample of a CPU is its parent task's PC, pid, tid",
           ("WHO",)),
    Mutant("tgid_as_tid", "every sample's tid is its thread group's id (the pid)", ("WHO",),
           needs=("records_tid",)),
    Mutant("user_pc_shift", "every user sample's PC lies 256 bytes below where the task was",
           ("WHERE",)),
    Mutant("kernel_pc_shift", "every kernel sample's PC lies 256 bytes above where it was",
           ("WHERE",)),
    # A verdict on nothing is the catch: no sample pairs with perf's (PROFILE UNJUDGED).
    # Not quick: two peer runs (about 90 s each) for a catch that follows from pairing.
    Mutant("ts_skew", "every sample's timestamp is 10 s ahead of the clock",
           (unjudged_token("PROFILE"),), case="peer", quick=False, needs=("pairs_profile",)),
    Mutant("self_throttle", "every 50th overflow stops its own event as perf throttling does",
           ("THROTTLE",)),
    Mutant("nmi_spinlock", "the producer path takes a spinlock in NMI context",
           ("CONSOLE",), case="debug", quick=False),
    Mutant("leak_at_start", "START allocates an object that nothing frees",
           ("KMEMLEAK",), case="debug", quick=False),
    # Judged where the guest's clock counts instructions: each flavour's budget scenario,
    # input-free (`Flavour.budget_scenario`, `harness.agent.oracles.budgets`).
    Mutant("slow_producer", "every producer call spins 500 µs of guest time before it returns",
           ("C-3",), case="deterministic"),
    # WITNESS's (issue 45): each judged against the emulator's witness, sample by sample, in
    # a run the witness saw (`harness.agent.witnessed`); every flavour that records the field.
    Mutant("kernel_tid_tgid", "every kernel sample's tid is its thread group's id",
           ("WITNESS",), case="witness", needs=("records_tid",)),
    Mutant("kernel_pc_hidden_2nd", "every second kernel sample's PC lies 64 KiB away and its "
           "timestamp 10 s ahead, out of every phase", ("WITNESS",), case="witness"),
    Mutant("parent_pid_29th", "every 29th sample carries its parent task's pid",
           ("WITNESS",), case="witness"),
    Mutant("pc_one_late", "every sample's PC is one instruction after where the task was",
           ("WITNESS",), case="witness"),
    Mutant("user_frames_stack", "a user walk's frames from the fourth on are stack addresses",
           ("WITNESS",), case="witness", needs=("records_chains",)),
    Mutant("kernel_chain_cut3", "a kernel walk is cut at three frames and says it ended",
           ("WITNESS",), case="witness", needs=("records_chains",)),
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
    """The mutants a run of ``flavour`` can expose: the core's it has what they need, its own.

    The content oracles judge every flavour's standard run (MODE, WHO's pids, WHERE's
    user half: what every flavour's samples carry), so their mutants apply to every
    flavour; those that need more (`Mutant.needs`) apply where its data says it has it.
    """
    info = flavours.get(flavour)
    core = tuple(m for m in CORE_MUTANTS if all(info.has(need) for need in m.needs))
    return (*core, *info.mutants)


@dataclass(frozen=True, slots=True)
class MutantRow:
    """One mutant on one flavour: what should catch it, what did, in which cases.

    ``failed`` are the oracles that failed in any of ``cases``; ``notes`` hold what
    else happened (a guest that crashed after the verdict, a case that errored).
    ``unjudged``: every run of the mutant was one its oracle could not judge, by a
    model that reads only the peer's evidence (`harness.agent.peer.counts.stretch_margin`: too
    many PMU periods folded by the emulator); the notes give each run's numbers.
    """

    mutant: str
    flavour: str
    expected: tuple[str, ...]
    failed: tuple[str, ...]
    cases: tuple[str, ...]
    notes: tuple[str, ...] = ()
    unjudged: bool = False

    @property
    def verdict(self) -> str:
        """``caught``, ``SURVIVED`` or ``unjudged`` for a mutant; ``clean``, ``BROKEN``.

        The last two are the control's. ``unjudged`` is never a catch, and never a
        survival either: the host decided it, not the agent (the table's notes say how
        much the emulator folded).
        """
        if self.mutant == NONE:  # a control that could judge nothing is no clean control
            return "BROKEN" if self.failed else ("unjudged" if self.unjudged else "clean")
        caught = bool(self.expected) and set(self.expected) <= set(self.failed)
        if caught:
            return "caught"
        return "unjudged" if self.unjudged else "SURVIVED"

    @property
    def ok(self) -> bool:
        """Whether this row is what it must be (an unjudged row is reported, not failed)."""
        return self.verdict in ("caught", "clean", "unjudged")

    def as_dict(self) -> dict[str, object]:
        """The row as JSON values."""
        return {"mutant": self.mutant, "flavour": self.flavour, "expected": list(self.expected),
                "failed": list(self.failed), "cases": list(self.cases),
                "notes": list(self.notes), "verdict": self.verdict}  # fmt: skip


def merge(
    mutant: str,
    flavour: str,
    expected: Sequence[str],
    cases: Iterable[tuple[str, Iterable[str]]],
    notes: Sequence[str] = (),
    *,
    unjudged: bool = False,
) -> MutantRow:
    """One row from each case's name and the oracles that failed in it."""
    seen: list[str] = []
    names: list[str] = []
    for case, failed in cases:
        names.append(case)
        seen += [oracle for oracle in sorted(failed) if oracle not in seen]
    return MutantRow(mutant, flavour, tuple(expected), tuple(seen), tuple(names), tuple(notes),
                     unjudged)  # fmt: skip


def survivors(rows: Iterable[MutantRow]) -> list[MutantRow]:
    """Rows that are not what they must be: surviving mutants, a control that failed."""
    return [row for row in rows if not row.ok]


def tally(rows: Iterable[MutantRow]) -> str:
    """How many rows got each verdict, in a fixed order: ``96 caught, 8 clean, 1 unjudged``."""
    counted = Counter(row.verdict for row in rows)
    order = ("caught", "clean", "unjudged", "SURVIVED", "BROKEN")
    return ", ".join(f"{counted[v]} {v}" for v in order if counted[v]) or "no rows"


def format_table(rows: Sequence[MutantRow]) -> str:
    """mutant, flavour, cases, expected oracle, oracles that failed, verdict."""
    titles = ("mutant", "flavour", "cases", "must fail", "failed", "verdict")
    cells = [
        (row.mutant, row.flavour, "+".join(row.cases), ",".join(row.expected) or "-",
         ",".join(row.failed) or "-", row.verdict)
        for row in rows
    ]  # fmt: skip
    lines = [line.rstrip() for line in align([titles, *cells])]
    notes = [f"  {row.mutant}/{row.flavour}: {note}" for row in rows for note in row.notes]
    return "\n".join([*lines, *(["notes:", *notes] if notes else [])])
