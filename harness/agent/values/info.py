"""What a flavour of the agent is, as data: statistics, quirk bits, records, ABI.

Pure data types, imported by every flavour's ``data.py`` and by the core. The C
templates loop over these tuples to declare counters and print them, and the
parsers and oracles use the same names, so a counter cannot be added on one
side only::

    info = harness.agent.flavours.get("tprof")
    info.stats            # names in the order of the `stats` file
    info.quirk_bit("TP-D1")
    info.template         # "agent/flavours/tprof/tprof.c.j2" (under guest/)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from harness.agent.values.layouts import FramedRecord, Ioctl, RecordLayout
from harness.errors import ConfigError

#: Per-CPU ground truth the core keeps before any flavour code runs (debugfs `nmi`).
CORE_PERCPU: tuple[tuple[str, str], ...] = (
    ("x_nmi_total", "overflow handler entries (overflows seen)"),
    ("x_nmi_ctx_ok", "entries with in_nmi() true"),
    ("x_nmi_ctx_bad", "entries with in_nmi() false (a normal IRQ: pseudo-NMI off)"),
    ("x_nmi_max_ns", "longest handler run"),
    ("x_nmi_sum_ns", "total handler time (mean = sum / total)"),
    ("x_irqoff_samples", "overflows that interrupted code running with IRQs masked"),
    ("x_throttled", "overflows after which the perf core throttled the event"),
    ("x_periods_undelivered", "periods the emulator never raised as an overflow in time"),
    ("x_periods_pending_at_stop", "of those, the periods still pending when the event stopped"),
    ("x_producer_calls", "calls of the flavour's producer, any context"),
    ("x_producer_calls_nmi", "producer calls in NMI context"),
    ("x_producer_calls_irq", "producer calls in hard-IRQ context"),
    ("x_producer_calls_task", "producer calls in task context"),
    ("x_injected", "producer calls made by injection (bursts, IRQ or task)"),
    ("x_probe_runs", "IRQ-off probe windows run on this CPU"),
    ("x_probe_ns", "time spent inside IRQ-off probe windows"),
    ("x_probe_hits", "overflows that arrived inside an IRQ-off probe window"),
    ("x_counter_value", "the sampling counter's value, read when its event was released"),
    ("x_enabled_ns", "time the sampling events were enabled: the time base for overflows due"),
    ("x_events_created", "perf events created on this CPU (START and CPU online)"),
    ("x_armed_at_ns", "guest clock (ktime_get_ns) just after its event was last created"),
    ("x_disarmed_at_ns", "guest clock just before its event was last disabled (0: not since)"),
    ("x_source_stops", "times a flavour stopped this CPU's event on purpose (hwpmc stall)"),
    ("x_source_stopped_ns", "time the event stood stopped on purpose: not emulator loss"),
    ("x_chain_walks", "call-chain walks (pa_chain), kernel or user"),
    ("x_chain_frames", "frames those walks wrote, the sampled PCs included"),
    ("x_chain_end", "walks that reached the stack's last frame record"),
    ("x_chain_truncated", "walks cut at the depth asked for"),
    ("x_chain_bad_fp", "walks ended by a misaligned or non-ascending frame pointer"),
    ("x_chain_off_stack", "kernel walks ended by a frame outside the task's stack"),
    ("x_chain_fault", "walks ended by a frame record that could not be read"),
    ("x_chain_no_regs", "walks with no registers to start from (kernel thread, synthetic)"),
    ("x_nmi_lock_violation", "locks taken in NMI context (must stay 0)"),
    ("x_nmi_alloc_violation", "allocations in NMI context (must stay 0)"),
)


@dataclass(frozen=True, slots=True)
class Quirk:
    """One seed defect the agent can reproduce when its bit is set."""

    bit: int
    defect: str
    effect: str


@dataclass(frozen=True, slots=True)
class Param:
    """One integer load parameter a flavour owns (``insmod profagent NAME=VALUE``).

    The name is the module parameter, the ``[agent]`` key of a scenario and the
    key of ``invoke agent --param``; the C variable is ``pa_<name>``, declared by
    the core for every flavour, read by the flavour that owns it. Names are
    unique across flavours and distinct from the core's parameters.
    """

    name: str
    default: int
    low: int
    high: int
    meaning: str

    def check(self, value: int) -> None:
        """:raise ConfigError: ``value`` is outside ``low..high``."""
        if not self.low <= value <= self.high:
            raise ConfigError(
                f"agent spec: {self.name}={value} is outside {self.low}..{self.high} "
                f"({self.meaning})"
            )


#: What a flavour's samples carry, or how they are judged, beyond what every flavour's
#: must (CPU, PC, pid, user/kernel mode): the `FlavourInfo` fields of the same names. A
#: core mutant that needs one is built into the runs of the flavours that have it.
Capability = Literal[
    "records_tid", "records_chains", "records_chain_stop", "kernel_pids", "pairs_profile"
]


@dataclass(frozen=True, slots=True)
class Mutant:
    """A deliberately broken agent build, and the oracles that must catch it.

    ``name`` is the mutation point in the C (``pa_mutant(NAME)``); ``case`` is the
    run that exposes it: one of `SHARED_CASES` -- ``standard`` (the flavour's standard
    run and an exact-count run on the default kernel), ``peer`` (the standard run with
    Linux perf beside it, for the flavours that have one), ``debug`` (the standard run
    on the debug kernel, its console and kmemleak scanned) -- or the name of one of
    its flavour's ``extra_runs`` (`harness.agent.flavour.Flavour`; hwpmc's
    ``counting``, kprof's ``offline``, ...), which the mutation runs look up by that
    name. ``quick`` mutants run in ``invoke ci``.
    """

    name: str
    sabotage: str
    caught_by: tuple[str, ...]
    case: str = "standard"
    quick: bool = True
    #: A core mutant judged only by the runs of flavours that have every one of these
    #: (`FlavourInfo.has`): the oracle that catches it reads what they record. Empty:
    #: every flavour's.
    needs: tuple[Capability, ...] = ()


#: The mutant cases every flavour has (`Mutant.case`); any other is an extra run's name.
#: ``deterministic``: the flavour's budget scenario (`Flavour.budget_scenario`) run
#: input-free, where the guest's clock counts instructions (time budgets: the core's C-3,
#: tprof's TP-O10).
#: ``kasan`` / ``kcsan``: the standard run on the ``debug`` (KASAN, UBSAN) / ``kcsan`` kernel,
#: judged by the sanitizer reports on its console (`harness.vm.sanitizer`).
#: ``witness``: the standard run with the emulator's witness armed, WITNESS judging every
#: sample against it (`harness.agent.witnessed`).
#: ``stress``: every case of the shared stress plan (`harness.scenarios.stress`), its
#: expectations failing as ``STRESS``.
SHARED_CASES = ("standard", "peer", "debug", "deterministic", "kasan", "kcsan", "witness",
                "stress")  # fmt: skip


@dataclass(frozen=True, slots=True)
class FlavourInfo:
    """One flavour as data: counters, quirks, records, its ABI and its C template.

    ``layouts`` and ``ioctls`` go into the generated ``profagent_abi.h`` and the
    Python decoder; ``template_context`` is what the flavour's own template (and
    the shared headers' flavour parts) read; ``fault_points`` are its debugfs
    ``fault`` names.
    """

    name: str
    flavour_id: int
    stats: tuple[tuple[str, str], ...]  # (name, meaning), global, order of `stats`
    stats_percpu: tuple[tuple[str, str], ...]  # (name, meaning), per CPU
    quirks: tuple[Quirk, ...]
    record: RecordLayout
    layouts: tuple[RecordLayout, ...] = ()
    ioctls: tuple[Ioctl, ...] = ()
    fault_points: tuple[str, ...] = ()
    template_context: Mapping[str, object] = field(default_factory=dict)
    mutants: tuple[Mutant, ...] = ()  # this flavour's mutation points
    params: tuple[Param, ...] = ()  # its own integer load parameters
    framed: tuple[FramedRecord, ...] = ()  # varint-framed stream records (kprof)
    # What its samples carry beyond CPU, PC, pid and mode, which every flavour's must:
    # the one place that says it (guest/agent/README.md, "The contract"). The content
    # oracles read it from each run's samples (`harness.agent.oracles.content_view`);
    # the core mutants that need it (`Mutant.needs`) and the guest tier read it here.
    #: Its records carry call chains (the core's ``pa_chain``), so CHAIN judges them and
    #: the chain mutants apply.
    records_chains: bool = False
    #: Its records carry the interrupted thread's id: WHO judges tids (kprof's do not).
    records_tid: bool = True
    #: Its chains carry the walk's frame count and stop cause beside their PCs (dt,
    #: hwpmc): CHAIN judges them against the core's walk counters.
    records_chain_stop: bool = False
    #: Its kernel samples carry the interrupted task's pid (kprof's kernel traces do not):
    #: WHERE's kernel half can choose the zero workload's kernel samples.
    kernel_pids: bool = True
    #: PROFILE compares only the samples of the interrupts both it and Linux perf took
    #: (`harness.agent.peer.pairing.pair_window`): for a flavour whose own overflow sets
    #: work going that perf then samples (dt's reader wakeup, hwpmc's stalled PMCs).
    pairs_profile: bool = False
    #: The per-CPU counter that says the IRQ-off probe's samples were dropped, where all
    #: of them can be (dt: a reader that cannot run while the probe masks IRQs leaves a
    #: full ring full); CHAIN's probe half may then compare nothing. None: never all.
    probe_drops: str | None = None
    #: The per-CPU counters whose sum is the producer calls on that CPU that left no
    #: sample in what a run reads (ring full, nested, not running, dropped with a
    #: buffer or block): WITNESS may skip that many witnessed overflows there
    #: (`harness.agent.oracles.witness`), and no more.
    sample_drops: tuple[str, ...] = ()

    @property
    def template(self) -> str:
        """An in-tree flavour's C template, under ``guest/``.

        The registry names every flavour's, one outside the tree too
        (`harness.agent.flavours.discovery.FlavourPackage.template`).
        """
        return f"agent/flavours/{self.name}/{self.name}.c.j2"

    def has(self, capability: Capability) -> bool:
        """Whether its samples carry (or are judged by) ``capability``."""
        return bool(getattr(self, capability))

    def ioctl(self, name: str) -> Ioctl:
        """The native ioctl called ``name`` (e.g. ``"DTIOCRECORD"``).

        :raise KeyError: the flavour has no such ioctl.
        """
        for ioctl in self.ioctls:
            if ioctl.name == name:
                return ioctl
        raise KeyError(name)

    @property
    def stat_names(self) -> tuple[str, ...]:
        """Global statistic names in file order."""
        return tuple(name for name, _ in self.stats)

    @property
    def percpu_names(self) -> tuple[str, ...]:
        """Per-CPU statistic names in file order."""
        return tuple(name for name, _ in self.stats_percpu)

    @property
    def quirk_mask(self) -> int:
        """All quirk bits this flavour knows."""
        mask = 0
        for quirk in self.quirks:
            mask |= 1 << quirk.bit
        return mask

    def param(self, name: str) -> Param:
        """The load parameter called ``name``.

        :raise ConfigError: the flavour has no such parameter (the message lists them).
        """
        for param in self.params:
            if param.name == name:
                return param
        known = ", ".join(p.name for p in self.params) or "none"
        raise ConfigError(f"flavour {self.name} has no parameter {name!r}; its parameters: {known}")

    def quirk_bit(self, defect: str) -> int:
        """The mask bit (as a value) that reproduces ``defect`` (e.g. ``"TP-D1"``)."""
        for quirk in self.quirks:
            if quirk.defect == defect:
                return 1 << quirk.bit
        known = ", ".join(q.defect for q in self.quirks)
        raise ConfigError(f"flavour {self.name} has no quirk {defect!r}; known: {known}")
