"""Which of both profilers' samples PROFILE compares: every CPU's, or only paired ones.

`profile_pair` folds the agent's samples and perf's (`harness.agent.peer.symbols`)
into the `ProfilePair` that `harness.agent.peer.profile.compare` judges::

    pair = profile_pair(agent_samples, perf_samples, symbols, drops={1: 12})
    pair.excluded                       # ((1, 12),): CPU 1 left out of both

**Thinned CPUs are left out**, where a flavour's peer hooks give its drops
(`harness.agent.peer.run.PeerHooks.drops`). None of the four does today: dt and
hwpmc compare paired samples (below), and tprof's and kprof's peer runs compare
every CPU, so they must not drop. A CPU where the agent counted samples it lost in
the run (a full ring, a recursive get: `ProfilePair.excluded`, from the flavour's
own drop counters) is not compared, neither its agent samples nor perf's: the
lost samples are no random subset. They are lost while the agent's reader is
starved, and what starves it shows in the profile itself: in dt's peer run at
1 ms (2 vCPUs) the reader spun on its wait queue's spinlock (dt_read →
prepare_to_wait_event → ``queued_spin_lock_slowpath`` / ``__cmpwait_case_32``)
for up to 83 ms while the ring holds 15 ms; CPU 0 dropped 146 events and CPU 1
91, and the agent was short exactly there (``queued_spin_lock_slowpath`` 284
against perf's 457) while idle and ``[user]`` matched to the sample: chi2 47.7
and 57.1 against 38 for a right agent. The drops themselves are judged by the
flavour's conservation oracles; the verdict names each CPU left out and its
count. A run whose every CPU was thinned has no PROFILE verdict, so a flavour's
peer run must not drop for PROFILE to bite. Nor has a run with fewer than
`MIN_COMPARED` samples a side: too few to see a wrong PC in a third of them.

**Paired profiles (dt, hwpmc).** Where a profiler's own overflow sets work going
on its CPU, the peer samples that work and the profiler never can: its own sample
comes first. dt wakes its reader after every event (the seed's soft interrupt),
and where perf's overflow of the same period comes a little later (a split pair,
`harness.agent.peer.counts`) perf samples the wakeup (2 vCPUs: gic_ipi_send_mask 5.7 %
against the agent's 0.3 %; the unmutated agent failed the whole-profile test in 4
of 10 runs). Where a profiler's counter stops (hwpmc's stalled PMCs), the peer
samples on and the times it alone sees are no random draw either. Such a flavour
compares only the samples of the interrupts both
profilers took (`paired`): per CPU, each agent sample with perf's next sample
in the order the driver handles the two counters, within a bound from the
flavour's measured interrupt (both counters are handled by one PMU interrupt,
their records written microseconds apart). Which interrupts were joint depends on
the two counters' phases and the emulator's lateness, not on the interrupted
code, so the paired samples are one draw for both. Joint interrupts need a period
shorter than the gaps between the guest's own events: a late overflow then folds
and one handler restarts both counters together (dt at 1 ms: 99-100 % paired; at
4 ms, the guest's tick, 1-98 % from run to run). Drops then leave nobody out: a
sample the agent lost has no pair, and perf's sample of that interrupt leaves
with it; a count the agent lost is PEER's and the flavour's conservation oracles'
to judge, not PROFILE's. The paired share is reported.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from harness.agent.peer.symbols import (
    Profile,
    Symboliser,
    agent_stack,
    fold,
    perf_stack,
)
from harness.agent.values.info import FlavourInfo
from harness.agent.values.samples import Sample
from harness.vm.perf import PerfSample

#: Two samples within this many ns on one CPU are one PMU interrupt's (`paired`): it
#: handles both counters, one after the other. Measured, the later record after the
#: earlier, between the 5th and 95th percentile: dt beside perf on 6.12, 2 vCPUs,
#: 10-74 µs (1831 of 1876 perf samples within 100 µs); hwpmc beside perf on the 6.1
#: debug kernel (KASAN), 8 vCPUs, 18-123 µs (8127 of 8530 hwpmc records within 200
#: µs). The two leaf symbols of a pair agreed in all but one pair of each run. A split
#: pair's second interrupt comes 0.1-5 ms after the first (`harness.agent.peer.counts`).
PAIR_WITHIN_NS = 200_000
#: Where a whole-profile sample lands when its overflow fell due while the other
#: profiler's handler ran: both counters raise one PMU interrupt, and the second is
#: taken on the first one's way out, in the interrupt controller's entry (arm64's GIC).
#: The leaf is the shared interrupt's, not the interrupted code's, and the two sides do
#: not share it alike: perf's handler is the longer, so the agent's overflows fall due
#: in it more. Seen: tprof beside perf, 1 vCPU (cold CI of 922f534), the agent 42 of
#: 1280 samples in gic_handle_irq and perf 2 of 1281, chi2 37.8 against 16.3 with
#: ``[user]`` and ``cpu_do_idle`` alike. Left out of both sides, counted in the verdict.
INTERRUPT_EXIT = frozenset({"gic_handle_irq"})


def pair_window(info: FlavourInfo) -> int | None:
    """How near a sample of flavour ``info`` must be to perf's to pair (`PeerHooks`).

    `PAIR_WITHIN_NS` where its data says PROFILE pairs its samples
    (`FlavourInfo.pairs_profile`); None where PROFILE folds whole profiles.
    """
    return PAIR_WITHIN_NS if info.pairs_profile else None


@dataclass(frozen=True, slots=True)
class ProfilePair:
    """The agent's and perf's profiles of one run, as PROFILE judges them."""

    agent: Profile
    perf: Profile
    #: (CPU, samples the agent counted as lost there): CPUs left out of both profiles.
    excluded: tuple[tuple[int, int], ...] = ()
    #: Paired profiles only (`paired`): (pairs, agent samples, perf samples) before pairing.
    pairing: tuple[int, int, int] | None = None
    #: (agent's, perf's) samples in `INTERRUPT_EXIT`, left out (paired: with their pair).
    exits: tuple[int, int] = (0, 0)

    def excluded_text(self) -> str:
        """The CPUs or samples left out, for a verdict ('' when none)."""
        parts = []
        if self.pairing is not None:
            pairs, agent, perf = self.pairing
            parts.append(f"paired samples only: {pairs} of the agent's {agent} and perf's "
                         f"{perf} ({pairs / perf if perf else 0:.0%} of perf's)")  # fmt: skip
        if any(self.exits):
            names = ", ".join(sorted(INTERRUPT_EXIT))
            parts.append(f"left out in the PMU interrupt's exit ({names}): the agent's "
                         f"{self.exits[0]}, perf's {self.exits[1]}")  # fmt: skip
        if self.excluded:
            cpus = ", ".join(f"CPU {cpu} ({n} lost)" for cpu, n in self.excluded)
            parts.append(f"left out, the agent dropped samples there: {cpus}")
        return "; ".join(parts)


def paired(
    agent: Iterable[Sample], perf: Iterable[PerfSample], within_ns: int
) -> list[tuple[Sample, PerfSample]]:
    """The samples of the interrupts both profilers took, as (agent, perf) pairs.

    One PMU interrupt handles both counters in the driver's fixed order (it walks
    its counters by index), so of one interrupt's two records the same profiler's
    comes first all run long. The order is read from the run: the side on which
    more of the agent's samples have a perf sample within ``within_ns``. A perf
    sample that near on the other side is a later interrupt, one that landed in the
    first one's aftermath: measured (dt at 4 ms, 2 vCPUs), perf's record came
    0-140 µs after dt's in 898 near pairs, all with one leaf symbol, while 28 of the
    30 pairs with perf's 40-60 µs before dt's had two (dt's in gic_handle_irq). Per
    CPU, in time order, each agent sample is paired with the next unused perf sample
    on the run's side, if within ``within_ns``.

    :raise ValueError: an agent sample without a time.
    """
    by_cpu: dict[int, list[PerfSample]] = {}
    for theirs in sorted(perf, key=lambda s: s.time_ns):
        by_cpu.setdefault(theirs.cpu, []).append(theirs)
    times = {cpu: [s.time_ns for s in found] for cpu, found in by_cpu.items()}
    mine = list(agent)
    if untimed := [s for s in mine if s.time_ns is None]:
        raise ValueError(f"an agent sample without a time: {untimed[0]}")
    mine.sort(key=lambda s: (s.cpu, s.time_ns or 0))
    after = perf_follows(mine, times, within_ns)
    pairs = []
    next_free: dict[int, int] = {}  # per CPU: perf's samples before this one are taken
    for sample in mine:
        at, cpu, on_cpu = sample.time_ns or 0, sample.cpu, times.get(sample.cpu, [])
        free = next_free.get(cpu, 0)
        if after:
            j = bisect.bisect_left(on_cpu, at, lo=free)
            near = j < len(on_cpu) and on_cpu[j] - at <= within_ns
        else:
            j = bisect.bisect_right(on_cpu, at, lo=free) - 1
            near = j >= free and at - on_cpu[j] <= within_ns
        if near:
            next_free[cpu] = j + 1
            pairs.append((sample, by_cpu[cpu][j]))
    return pairs


def perf_follows(
    agent: Sequence[Sample], times: Mapping[int, Sequence[int]], within_ns: int
) -> bool:
    """Whether perf's record of a joint interrupt comes after the agent's (`paired`).

    ``times``: perf's sample times per CPU, sorted. Ties go to perf after.
    """
    after = before = 0
    for sample in agent:
        at, on_cpu = sample.time_ns or 0, times.get(sample.cpu, ())
        i = bisect.bisect_left(on_cpu, at)
        after += i < len(on_cpu) and on_cpu[i] - at <= within_ns
        before += i > 0 and at - on_cpu[i - 1] <= within_ns
    return after >= before


def profile_pair(
    agent: Iterable[Sample],
    perf: Iterable[PerfSample],
    symbols: Symboliser,
    drops: Mapping[int, int],
    *,
    pair_within_ns: int | None = None,
) -> ProfilePair:
    """Both profiles folded, every CPU with drops (CPU → samples lost) left out of both.

    With ``pair_within_ns``, only `paired` samples, and no CPU is left out (the
    module docstring says why); the agent's samples must then carry
    a time (`paired` raises otherwise). A pair either of whose leaves is in
    `INTERRUPT_EXIT` is left out too (counted in ``exits``): seen, hwpmc beside perf on
    1 vCPU (cold CI of 1c77fed), perf 54 of 1341 paired samples in gic_handle_irq and
    the agent 3, chi2 47.5 against 29.6 with every other symbol alike.
    """
    if pair_within_ns is not None:
        mine, theirs = list(agent), list(perf)
        pairs = paired(mine, theirs, pair_within_ns)
        stacks = [(agent_stack(a, symbols), perf_stack(p, symbols)) for a, p in pairs]
        # A pair with a side in the interrupt's exit is a split pair's second interrupt,
        # taken on the first one's way out, not one interrupt's two records: out.
        kept = [(a, p) for a, p in stacks if not (_in_exit(a) or _in_exit(p))]
        return ProfilePair(
            agent=fold(a for a, _ in kept),
            perf=fold(p for _, p in kept),
            pairing=(len(pairs), len(mine), len(theirs)),
            exits=(sum(_in_exit(a) for a, _ in stacks), sum(_in_exit(p) for _, p in stacks)),
        )
    excluded = tuple(sorted((cpu, n) for cpu, n in drops.items() if n > 0))
    left_out = {cpu for cpu, _ in excluded}
    agent_stacks = [agent_stack(s, symbols) for s in agent if s.cpu not in left_out]
    perf_stacks = [perf_stack(s, symbols) for s in perf if s.cpu not in left_out]
    return ProfilePair(
        agent=fold(s for s in agent_stacks if not _in_exit(s)),
        perf=fold(s for s in perf_stacks if not _in_exit(s)),
        excluded=excluded,
        exits=(sum(map(_in_exit, agent_stacks)), sum(map(_in_exit, perf_stacks))),
    )


def _in_exit(stack: tuple[str, ...]) -> bool:
    """Whether a stack's leaf is the shared PMU interrupt's exit (`INTERRUPT_EXIT`)."""
    return bool(stack) and stack[-1] in INTERRUPT_EXIT
