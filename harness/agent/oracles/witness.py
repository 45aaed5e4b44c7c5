"""WITNESS: every sample the agent recorded against the overflow the emulator saw first.

Pure. The witness (`harness.vm.witness`) broke on the agent's overflow handler from
outside the guest and read, before any agent instruction ran, what the kernel handed it:
the interrupted PC and mode, ``current``'s pid and tid, the frame records. Its
population is every overflow it saw (kernel, user, idle, any process), never a set the
agent's own fields choose.

**Pairing.** Per CPU, the agent's records in their order are the witnessed overflows in
theirs. With no drop counted on a CPU the pairing is one to one, by position. Where the
agent counted ``d`` drops, it may skip up to ``d`` overflows, each time at the first
overflow whose PC and mode are the sample's; a sample with no such overflow within the
allowance pairs with the next one (and is then a mismatch). Overflows or samples left
over beyond the allowance are gaps: failures.

**Fields**, all at once, *equal*: PC, mode, pid, tid (where the flavour records it), and
where it records chains, every frame (``chain`` equal to the witnessed walk cut to the
run's depth), the truncation flag and, where recorded, the frame count and stop cause;
where a kernel sample also records its task's user stack (dt's ``ustack``), that walk
and its stop cause (``ustack``), against the user walk the witness made from the
registers the kernel saved at the task's entry (``no_regs`` for a kernel thread). Not
where the witness saw the CPU's TTBR0 hold another table than the task's (``foreign_ttbr0``,
mid ``switch_mm``): that user stack is not judged, counted with its share, never equal.
A walk the agent says ended in a fault may stop short of the witness's, which reads
memory the agent cannot read in NMI context (`faulted_early`); its frames up to there
are still held equal.
No statistical bound. The witnessed walk follows the contract's rule
(`harness.vm.witness.gdbside`), from memory the witness read itself.

**Completeness.** The witness's overflows per CPU equal the PMU interrupts the guest
kernel counted there between START and STOP (where the PMU was the agent's alone):
it missed none.

**NMI.** Each overflow's context as the witness read it (the kernel's preempt count):
in NMI where the guest delivers PMU interrupts as NMIs, never elsewhere; and the
overflows that interrupted an IRQs-masked context, counted (only an NMI gets there).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol, runtime_checkable

from harness.agent.oracles.content import check_mode
from harness.agent.oracles.content_view import ContentView
from harness.agent.oracles.evidence import KernelEvidence
from harness.agent.oracles.who import check_who, judge_who
from harness.agent.oracles.witness_walks import (
    expected_walk,
    faulted_early,
    user_walk_differs,
    user_walk_foreign,
)
from harness.agent.values.info import FlavourInfo
from harness.agent.values.results import Judged, Violation
from harness.agent.values.samples import Sample
from harness.vm.witness.records import STOPS, Overflow, WitnessLog

ORACLE = "WITNESS"
FIELDS = ("pc", "mode", "pid", "tid", "chain", "truncated", "length", "stop", "ustack")
SHOWN = 5


@dataclass(frozen=True, slots=True)
class WitnessInput:
    """What WITNESS judges: one run's samples, what the witness saw, and their context.

    ``drops``: per CPU, the samples the agent counted as dropped (its flavour's drop
    counters), the pairing's allowance. ``chain_depth``: frames per walk the run asked
    for (None: the flavour records no chain). ``interrupts``: the kernel's PMU interrupts
    per CPU between START and STOP (None: not read, or the PMU was shared).
    """

    samples: tuple[Sample, ...]
    log: WitnessLog
    drops: Mapping[int, int]
    chain_depth: int | None
    records_tid: bool
    nmi_expected: bool
    kernel_pids: bool = True  # its kernel samples carry the task's pid (kprof's do not)
    #: Per CPU, the walks the core counted as ended by a fault (``x_chain_fault``).
    faults: Mapping[int, int] = field(default_factory=dict)
    interrupts: Mapping[int, int] | None = None


@dataclass(frozen=True, slots=True)
class Mismatch:
    """One sample that is not what the witness saw, beside that overflow."""

    cpu: int
    index: int  # the sample's position among its CPU's records
    sample: Sample
    overflow: Overflow
    fields: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class WitnessVerdict:
    """What WITNESS compared, and every difference it found."""

    compared: int = 0
    frames: int = 0  # recorded frames held equal to the witness's, PCs included
    user_stacks: int = 0  # kernel records' user stacks held equal to the witness's walk
    user_paired: int = 0  # kernel records with a user stack paired with a kernel hit
    user_foreign: int = 0  # of those, not judged: TTBR0 was not the task's (foreign_ttbr0)
    user_foreign_read: int = 0  # of those, the agent's walk read frames past its user PC
    overflows: int = 0
    samples: int = 0
    skipped: int = 0  # overflows the pairing skipped against counted drops
    left: int = 0  # overflows after a CPU's last record, against its drops not skipped
    by_field: Mapping[str, int] = field(default_factory=dict)
    mismatches: tuple[Mismatch, ...] = ()
    gaps: tuple[Violation, ...] = ()
    missed: tuple[Violation, ...] = ()  # witness count against the kernel's, per CPU
    interrupts_compared: int = 0  # CPUs whose interrupt count the witness count met
    nmi: tuple[Violation, ...] = ()
    in_nmi: int = 0
    irqs_masked: int = 0
    rereported: int = 0
    chains: bool = False  # the run records chains: the frames part applies
    counted: bool = False  # the kernel's interrupt counts were read: the complete part applies

    def violations(self) -> list[Violation]:
        """Gaps, missed overflows, wrong NMI context, and one for every mismatched sample."""
        found = [*self.gaps, *self.missed, *self.nmi]
        if self.mismatches:
            counts = ", ".join(f"{k} {v}" for k, v in self.by_field.items() if v)
            first = self.mismatches[0]
            found.append(Violation(ORACLE, first.cpu, "every field equal to the witness's",
                                   f"{len(self.mismatches)} of {self.compared} samples differ "
                                   f"({counts})", side_by_side(self.mismatches)))  # fmt: skip
        return found

    def judged(self) -> tuple[Judged, ...]:
        """Samples paired, frames equal, CPUs counted complete, overflows' context read.

        ``frames`` only where the run records chains, ``ustack`` where kernel records'
        user stacks were paired, ``complete`` where the kernel's interrupt counts were read
        for the agent alone.
        """
        why = "the witness saw no overflow" if not self.overflows else "nothing paired"
        found = [Judged(ORACLE, self.compared, "samples paired with witnessed overflows", why)]
        if self.chains:
            found.append(Judged(ORACLE, self.frames, "frames equal to the witnessed walk",
                                "no chain paired", part="frames"))  # fmt: skip
        if self.user_paired:  # the flavour records kernel samples' user stacks (dt)
            found.append(Judged(ORACLE, self.user_stacks, "kernel records' user stacks equal",
                                "each under a foreign TTBR0", part="ustack"))  # fmt: skip
        if self.counted:
            found.append(Judged(ORACLE, self.interrupts_compared, "CPUs' PMU interrupts met",
                                "no CPU's count met", part="complete"))  # fmt: skip
        found.append(Judged(ORACLE, self.overflows, "overflows' NMI context witnessed",
                            "the witness saw no overflow", part="nmi"))  # fmt: skip
        return tuple(found)


def differences(sample: Sample, overflow: Overflow, w: WitnessInput, *,
                faults: int = 0) -> tuple[str, ...]:  # fmt: skip
    """The fields in which ``sample`` is not what the witness saw.

    ``faults``: faulted walks the core counted on the CPU and no pair has used yet.
    """
    wrong = []
    if sample.pc != overflow.pc:
        wrong.append("pc")
    if sample.user != overflow.user:
        wrong.append("mode")
    if (sample.user or w.kernel_pids) and sample.pid != overflow.pid:
        wrong.append("pid")
    if w.records_tid and sample.tid != overflow.tid:
        wrong.append("tid")
    if w.chain_depth is not None and w.chain_depth > 1:
        chain, stop = expected_walk(overflow, w.chain_depth)
        if faulted_early(sample, chain, counted=faults > 0):
            chain, stop = sample.chain, "fault"
        if sample.chain != chain:
            wrong.append("chain")
        if sample.truncated != (stop == "truncated"):
            wrong.append("truncated")
        if sample.length is not None and sample.length != len(chain) + 1:
            wrong.append("length")
        if sample.stop is not None and STOPS[sample.stop : sample.stop + 1] != (stop,):
            wrong.append("stop")
        if user_walk_differs(sample, overflow, w.chain_depth):
            wrong.append("ustack")
    return tuple(wrong)


Pairs = list[tuple[int, Sample, Overflow]]


def _pair_cpu(samples: Sequence[Sample], seen: Sequence[Overflow], allowance: int,
              w: WitnessInput) -> tuple[Pairs, int, int, int]:  # fmt: skip
    """(index, sample, overflow) pairs; overflows skipped; samples and overflows left over.

    Within the allowance, a sample pairs with the first overflow it equals in every field,
    else the first with its PC and mode, else the next one.
    """
    pairs: list[tuple[int, Sample, Overflow]] = []
    j = skipped = 0
    for index, sample in enumerate(samples):
        if j >= len(seen):
            return pairs, skipped, len(samples) - index, 0
        window = seen[j : j + min(allowance - skipped, len(seen) - j - 1) + 1]
        where = (sample.pc, sample.user)
        step = next((k for k, o in enumerate(window) if not differences(sample, o, w, faults=1)),
                    None)  # fmt: skip
        if step is None:
            step = next((k for k, o in enumerate(window) if (o.pc, o.user) == where), 0)
        skipped += step
        j += step
        pairs.append((index, sample, seen[j]))
        j += 1
    return pairs, skipped, 0, len(seen) - j


def judge_witness(w: WitnessInput) -> WitnessVerdict:
    """Pair and compare every sample; count the witness against the kernel and its NMI state."""
    by_cpu: dict[int, list[Sample]] = {}
    for sample in w.samples:
        by_cpu.setdefault(sample.cpu, []).append(sample)
    seen = w.log.per_cpu()
    counts = dict.fromkeys(FIELDS, 0)
    mismatches: list[Mismatch] = []
    gaps: list[Violation] = []
    compared = frames = user_stacks = user_paired = user_foreign = read = skipped_total = 0
    left_total = 0
    for cpu in sorted(set(by_cpu) | set(seen)):
        allowance = w.drops.get(cpu, 0)
        pairs, skipped, left_samples, left_overflows = _pair_cpu(
            by_cpu.get(cpu, []), seen.get(cpu, ()), allowance, w
        )
        skipped_total, left_total = skipped_total + skipped, left_total + left_overflows
        faults = w.faults.get(cpu, 0)
        if left_samples:
            gaps.append(Violation(ORACLE, cpu, "every sample a witnessed overflow",
                                  f"{left_samples} samples after the last overflow"))  # fmt: skip
        if left_overflows > allowance - skipped:
            gaps.append(Violation(ORACLE, cpu, f"at most {allowance - skipped} overflows "
                                  "unrecorded (the drops counted, less those skipped)",
                                  f"{left_overflows} overflows no sample records"))  # fmt: skip
        for index, sample, overflow in pairs:
            compared += 1
            foreign = user_walk_foreign(sample, overflow)
            user_paired += sample.user_stop is not None and overflow.user_stop is not None
            user_foreign += foreign
            read += foreign and len(sample.user_walk) > 1
            wrong = differences(sample, overflow, w, faults=faults)
            if sample.stop is None and faults and not wrong and w.chain_depth:
                faults -= faulted_early(sample, expected_walk(overflow, w.chain_depth)[0],
                                        counted=True)  # fmt: skip
            for name in wrong:
                counts[name] += 1
            if wrong:
                mismatches.append(Mismatch(cpu, index, sample, overflow, wrong))
            elif w.chain_depth and w.chain_depth > 1:
                frames += len(sample.chain) + 1 + (0 if foreign else len(sample.user_walk))
                user_stacks += (sample.user_stop is not None and overflow.user_stop is not None
                                and not foreign)  # fmt: skip
    missed, met = _complete(w)
    nmi = _nmi(w)
    return WitnessVerdict(
        compared=compared, frames=frames, user_stacks=user_stacks, user_paired=user_paired,
        user_foreign=user_foreign, user_foreign_read=read,
        overflows=len(w.log.overflows),
        samples=len(w.samples), skipped=skipped_total, left=left_total, by_field=counts,
        mismatches=tuple(mismatches), gaps=tuple(gaps), missed=tuple(missed),
        interrupts_compared=met, nmi=tuple(nmi),
        in_nmi=sum(o.nmi for o in w.log.overflows),
        irqs_masked=sum(o.irqs_masked for o in w.log.overflows),
        rereported=w.log.rereported,
        chains=bool(w.chain_depth and w.chain_depth > 1),
        counted=w.interrupts is not None,
    )  # fmt: skip


def _complete(w: WitnessInput) -> tuple[list[Violation], int]:
    """The witness's count per CPU against the kernel's PMU interrupts; CPUs compared."""
    if w.interrupts is None:
        return [], 0
    seen = w.log.per_cpu()
    found = [Violation(ORACLE, cpu, f"{kernel} overflows witnessed (the kernel's PMU "
                       "interrupts)", f"{len(seen.get(cpu, ()))}", "complete")
             for cpu, kernel in sorted(w.interrupts.items())
             if kernel != len(seen.get(cpu, ()))]  # fmt: skip
    if not w.log.complete:
        cut = "the witness's log is cut short"
        found.append(Violation(ORACLE, None, f"{w.log.hits} hits logged",
                               f"{len(w.log.overflows)}", cut))  # fmt: skip
    return found, len(w.interrupts) - len(found)


def _nmi(w: WitnessInput) -> list[Violation]:
    """Every overflow in NMI context where the guest delivers them as NMIs; none elsewhere."""
    wrong = [o for o in w.log.overflows if o.nmi != w.nmi_expected]
    if not wrong:
        return []
    where = "in NMI" if w.nmi_expected else "outside NMI"
    return [Violation(ORACLE, wrong[0].cpu, f"every overflow handed over {where}",
                      f"{len(wrong)} of {len(w.log.overflows)} not", "nmi")]  # fmt: skip


def side_by_side(mismatches: Sequence[Mismatch]) -> str:
    """The first `SHOWN` mismatches: the agent's record beside the witness's."""
    lines = []
    for m in mismatches[:SHOWN]:
        s, o = m.sample, m.overflow
        lines.append(f"CPU {m.cpu} #{m.index} ({', '.join(m.fields)}):")
        lines.append(
            f"  agent   pc={s.pc:#x} {'user' if s.user else 'kernel'} pid={s.pid} "
            f"tid={s.tid} chain={[hex(a) for a in s.chain]} truncated={s.truncated}"
        )
        lines.append(
            f"  witness pc={o.pc:#x} {'user' if o.user else 'kernel'} pid={o.pid} "
            f"tid={o.tid} chain={[hex(a) for a in o.chain]} stop={o.stop}"
        )
    return "\n".join(lines)


def format_witness(v: WitnessVerdict) -> str:
    """The verdict's numbers, for the run's report."""
    counts = ", ".join(f"{k} {n}" for k, n in v.by_field.items())
    return (f"WITNESS: {v.compared} samples paired with {v.overflows} witnessed overflows "
            f"({v.samples} recorded; against counted drops {v.skipped} overflows skipped, "
            f"{v.left} after the last record; "
            f"{v.rereported} hits gdb reported twice left out); "
            f"{v.frames} frames equal ({v.user_stacks} kernel records' user stacks among "
            f"them; {_foreign(v)}); mismatches: {counts}; in NMI {v.in_nmi}, "
            f"IRQs masked where interrupted {v.irqs_masked}")  # fmt: skip


def _foreign(v: WitnessVerdict) -> str:
    """The kernel records' user stacks not judged, and their share of those paired."""
    share = f" ({100 * v.user_foreign / v.user_paired:.1f} %)" if v.user_paired else ""
    return (f"{v.user_foreign} of {v.user_paired} not judged{share}: TTBR0 not the "
            f"task's table (foreign_ttbr0), {v.user_foreign_read} of them read past the "
            "user PC by the agent")  # fmt: skip


@runtime_checkable
class WitnessedRun(Protocol):
    """What WITNESS reads of a flavour's run: its samples, its counters, the kernel's count."""

    @property
    def kernel(self) -> KernelEvidence | None:
        """PMU interrupts the guest kernel counted around the run."""

    def content(self) -> ContentView:
        """The run's samples (and ground truth)."""

    def numbers(self) -> dict[str, int]:
        """Every counter under one flat name (``percpu.<cpu>.<name>``)."""


def witness_input(run: WitnessedRun, log: WitnessLog, *, info: FlavourInfo,
                  nmi_expected: bool) -> WitnessInput:  # fmt: skip
    """WITNESS's input from one run: its samples and counters, the kernel's interrupts.

    The drop allowance sums the flavour's `FlavourInfo.sample_drops` per CPU; the
    interrupt counts are used only where the PMU was the agent's alone.
    """
    content, numbers, kernel = run.content(), run.numbers(), run.kernel
    samples = content.samples
    cpus = {o.cpu for o in log.overflows} | {s.cpu for s in samples}
    drops = {cpu: sum(numbers.get(f"percpu.{cpu}.{name}", 0) for name in info.sample_drops)
             for cpu in cpus}  # fmt: skip
    faults = {cpu: numbers.get(f"core.{cpu}.x_chain_fault", 0) for cpu in cpus}
    interrupts = None
    if kernel is not None and not kernel.pmu_shared:
        deltas = {cpu: kernel.delta(cpu) for cpu in kernel.before}
        interrupts = {cpu: d for cpu, d in deltas.items() if d is not None}
    return WitnessInput(tuple(samples), log, drops, content.chain_depth, info.records_tid,
                        nmi_expected, info.kernel_pids, faults, interrupts)  # fmt: skip


def as_sample(overflow: Overflow) -> Sample:
    """What the witness saw, as a sample: the content oracles judge it as any flavour's."""
    return Sample(overflow.cpu, overflow.pc, overflow.pid, overflow.tid, overflow.user,
                  chain=overflow.chain, truncated=overflow.stop == "truncated")  # fmt: skip


def witness_against_truth(log: WitnessLog, content: ContentView) -> tuple[list[Violation], int]:
    """The witness itself against what the ground-truth workload says of itself.

    MODE and WHO judge the witnessed overflows as samples, over the same workload runs
    and symbols as the agent's (its population: the witness's, by pid, PC and CPU).
    Each law they break is a WITNESS violation (part ``truth``): the witness would be
    wrong, not the agent. Returns those and the overflows WHO's text half judged.
    """
    view = replace(content, samples=tuple(map(as_sample, log.overflows)), chain_depth=None)
    found = check_mode(view.samples) + (check_who(view) if view.image is not None else [])
    judged = judge_who(view) if view.image is not None else []
    n = next((j.n for j in judged if j.part == "text"), 0)
    why = "truth: the witness's own overflows"
    return [Violation(ORACLE, v.cpu, v.expected, v.observed, f"{why} ({v.oracle})")
            for v in found], n  # fmt: skip
