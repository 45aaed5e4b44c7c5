"""PROFILE: the agent's samples, folded by symbol, against Linux perf's over the same run.

A sample is a PC and, where the profiler walked one, its callers. Both profilers'
samples go through one `Symboliser` (the guest's ``/proc/kallsyms`` for kernel PCs,
a workload's ELF symbols for user PCs; anything else is ``[kernel]`` or ``[user]``),
so the comparison tests the agent's PCs, not two symbolisers. The folded stacks
(``root;…;leaf N``) are the text that flamegraph.pl, inferno and speedscope read::

    symbols = Symboliser(parse_kallsyms(text))
    agent = fold(agent_stack(s, symbols) for s in samples)
    peer = fold(perf_stack(s, symbols) for s in perf_counts.stacks)
    verdict = compare(agent.leaves(), peer.leaves())   # chi-square homogeneity
    verdict.passed, verdict.statistic, verdict.critical

**The test.** Chi-square homogeneity of a 2 × k table: the agent's and perf's leaf
symbols, k categories being every symbol whose smaller side expects at least
`MIN_EXPECTED` samples (at most `TOP`), the rest pooled as ``other``. With both
profiles independent multinomial draws from one distribution, the statistic is
chi-square with k - 1 degrees of freedom and the test rejects a right profile with
probability `ALPHA` (1 in 1000): that is its false-alarm rate. Here the two are
not independent but positively correlated: both counters count the same event
(QEMU's virtual clock) on the same CPU, and one PMU interrupt usually handles both
(`harness.agent.peer.counts`'s model), so both record the same interrupted PC; only
split pairs and the window edges draw apart. Positive correlation shrinks the
difference of the two histograms, so the false-alarm rate is at most `ALPHA`.
TCG's folding (periods the emulator never raised in time) thins both alike, for
the same reason: it is one interrupt for both. The period must be the same too:
TCG notices an overflow at the guest's own events (exceptions, its 4 ms tick), so
where a sample lands depends on how the period aliases with them. An agent whose
counter runs 1/8 slow (mutant ``stretched_period``) was apart from perf in one kprof
run of two on 2 vCPUs (chi2 43.7 against 22.5; [user] 80.3 % against 74.1 %). A
wrong profile (a third of the agent's samples moved to one kernel address: mutant
``fixed_pc_3rd``) shifts a third of the mass and gives a statistic in the hundreds
or thousands for one or a few thousand samples.

**Thinned CPUs are left out.** A CPU where the agent counted samples it lost in
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
import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from harness.vm.perf import PerfSample

#: The false-alarm rate of `compare` for independent draws of one distribution.
ALPHA = 1e-3
#: Two samples within this many ns on one CPU are one PMU interrupt's (`paired`): it
#: handles both counters, one after the other. Measured, the later record after the
#: earlier, between the 5th and 95th percentile: dt beside perf on 6.12, 2 vCPUs,
#: 10-74 µs (1831 of 1876 perf samples within 100 µs); hwpmc beside perf on the 6.1
#: debug kernel (KASAN), 8 vCPUs, 18-123 µs (8127 of 8530 hwpmc records within 200
#: µs). The two leaf symbols of a pair agreed in all but one pair of each run. A split
#: pair's second interrupt comes 0.1-5 ms after the first (`harness.agent.peer.counts`).
PAIR_WITHIN_NS = 200_000
MIN_EXPECTED = 5  # the chi-square approximation's usual floor per cell
TOP = 20  # at most this many symbols are tested one by one; the rest are "other"
#: PROFILE judges a run on at least this many samples a side (`unjudgeable`). The
#: least wrong profile it must see is a wrong PC in a third of the agent's samples
#: (mutant fixed_pc_3rd). A wrong PC in a fraction f of n samples a side adds about
#: n·f (the wrong symbol's cell) + n·f²/(2 - f) (every other cell short by f) to the
#: statistic: 0.36 n for a third, 107 at 300, over twice the largest critical value
#: (45.3 at df 20).
MIN_COMPARED = 300
KERNEL_TOP_BIT = 1 << 63  # arm64 and x86-64 kernel addresses have the top bit set
KERNEL, USER, OTHER = "[kernel]", "[user]", "other"
_TEXT_TYPES = frozenset("tTwW")


class ProfileSample(Protocol):
    """What the profile reads of one agent sample (any flavour's record)."""

    @property
    def cpu(self) -> int:
        """The CPU it was taken on."""

    @property
    def pc(self) -> int:
        """The interrupted PC."""

    @property
    def user(self) -> bool:
        """Whether the PC is a user-mode PC."""

    @property
    def chain(self) -> tuple[int, ...]:
        """Its callers, innermost first (empty: the profiler walked none)."""


@dataclass(frozen=True, slots=True)
class AgentSample:
    """One agent sample as the profile reads it (a flavour's adapter builds these)."""

    cpu: int
    pc: int
    user: bool
    chain: tuple[int, ...] = ()
    time_ns: int | None = None  # CLOCK_MONOTONIC, as perf's (`paired` needs it)


@dataclass(frozen=True, slots=True)
class KernelSymbols:
    """The kernel's text symbols (``/proc/kallsyms``), sorted by address."""

    starts: tuple[int, ...]
    names: tuple[str, ...]

    def name(self, addr: int) -> str:
        """The symbol ``addr`` falls in (the last one starting at or below it), or ``[kernel]``."""
        i = bisect.bisect_right(self.starts, addr) - 1
        return self.names[i] if i >= 0 else KERNEL


@dataclass(frozen=True, slots=True)
class UserSymbols:
    """A workload's function symbols: (start, end, name); ``binary`` as perf names its dso.

    ``base``: where its text is mapped (perf prints user addresses relative to it).
    """

    binary: str
    ranges: tuple[tuple[int, int, str], ...]
    base: int = 0

    def name(self, addr: int) -> str | None:
        """The function holding ``addr``, if any."""
        for start, end, name in self.ranges:
            if start <= addr < end:
                return name
        return None


@dataclass(frozen=True, slots=True)
class Symboliser:
    """Names a PC the same way for the agent and for perf."""

    kernel: KernelSymbols
    user: UserSymbols | None = None

    def frame(self, pc: int, *, user: bool) -> str:
        """The name of ``pc``: a kernel or workload symbol, else ``[kernel]``/``[user]``."""
        if not user:
            return self.kernel.name(pc)
        found = self.user.name(pc) if self.user is not None else None
        return found or USER


def parse_kallsyms(text: str) -> KernelSymbols:
    """Text symbols of ``/proc/kallsyms`` (``addr type name [module]``), by address.

    Where several names share an address, one without a leading underscore wins
    (``gic_handle_irq`` over ``_stext``), else the first; zero addresses (a
    reader without the right to see them) are skipped.
    """
    best: dict[int, str] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 3 or parts[1] not in _TEXT_TYPES:
            continue
        try:
            addr = int(parts[0], 16)
        except ValueError:
            continue
        if addr == 0:
            continue
        held = best.get(addr)
        if held is None or (held.startswith("_") and not parts[2].startswith("_")):
            best[addr] = parts[2]
    starts = tuple(sorted(best))
    return KernelSymbols(starts, tuple(best[a] for a in starts))


def _at(index: int) -> int:
    """How far before a frame's address its function is looked up (`agent_stack`)."""
    return 1 if index else 0


def agent_stack(sample: ProfileSample, symbols: Symboliser) -> tuple[str, ...]:
    """``sample``'s frames named, root first (its chain shares its PC's mode).

    The PC is named at the PC, each caller at its return address - 1: the call's
    own function (after a call that never returns, the return address is the next
    function's first instruction: CPU 0's idle would read ``start_kernel →
    arch_post_acpi_subsys_init``).
    """
    frames = (sample.pc, *sample.chain)
    named = (symbols.frame(pc - _at(i), user=sample.user) for i, pc in enumerate(frames))
    return _one_user(reversed(tuple(named)))


def perf_stack(sample: PerfSample, symbols: Symboliser) -> tuple[str, ...]:
    """A perf sample's frames named by ``symbols``, root first, callers at address - 1.

    Kernel frames by their address (callers' at - 1, as `agent_stack`'s); user
    frames in the workload's binary by the workload's symbols (perf prints their
    address relative to the mapping: plus ``base``), or where those name none by
    perf's own symbol (perf's is at the address itself, so only a leaf's agrees with
    ours at a function's first instruction); any other user frame is ``[user]``.
    """
    names = []
    user = symbols.user
    for index, frame in enumerate(sample.frames):
        ip = frame.ip - _at(index)
        if frame.ip >= KERNEL_TOP_BIT:
            names.append(symbols.kernel.name(ip))
        elif user is None or frame.dso.rsplit("/", 1)[-1] != user.binary:
            names.append(USER)
        else:
            own = user.name(ip + user.base)
            perf = frame.sym.split("+", 1)[0] if frame.sym != "[unknown]" else None
            names.append(own or perf or USER)
    return _one_user(reversed(names))


def _one_user(names: Iterable[str]) -> tuple[str, ...]:
    """``names`` with each run of unnamed user frames (``[user]``) as one frame."""
    found: list[str] = []
    for name in names:
        if not (name == USER and found and found[-1] == USER):
            found.append(name)
    return tuple(found)


@dataclass(frozen=True, slots=True)
class Profile:
    """Folded stacks: (root … leaf, count), most frequent first."""

    stacks: tuple[tuple[tuple[str, ...], int], ...]

    @property
    def total(self) -> int:
        """Samples folded."""
        return sum(n for _, n in self.stacks)

    def leaves(self) -> dict[str, int]:
        """Samples per leaf symbol (where each sample's PC was)."""
        found: Counter[str] = Counter()
        for stack, n in self.stacks:
            found[stack[-1] if stack else KERNEL] += n
        return dict(found)

    def folded(self) -> str:
        """The folded-stack text: one ``root;…;leaf N`` line per stack."""
        return "".join(f"{';'.join(stack)} {n}\n" for stack, n in self.stacks if stack)


def fold(stacks: Iterable[tuple[str, ...]]) -> Profile:
    """Count identical stacks; most frequent first, then by name."""
    counted = Counter(stacks)
    return Profile(tuple(sorted(counted.items(), key=lambda item: (-item[1], item[0]))))


@dataclass(frozen=True, slots=True)
class ProfilePair:
    """The agent's and perf's profiles of one run, as PROFILE judges them."""

    agent: Profile
    perf: Profile
    #: (CPU, samples the agent counted as lost there): CPUs left out of both profiles.
    excluded: tuple[tuple[int, int], ...] = ()
    #: Paired profiles only (`paired`): (pairs, agent samples, perf samples) before pairing.
    pairing: tuple[int, int, int] | None = None

    def excluded_text(self) -> str:
        """The CPUs or samples left out, for a verdict ('' when none)."""
        if self.pairing is not None:
            pairs, agent, perf = self.pairing
            return (f"paired samples only: {pairs} of the agent's {agent} and perf's {perf} "
                    f"({pairs / perf if perf else 0:.0%} of perf's)")  # fmt: skip
        if not self.excluded:
            return ""
        cpus = ", ".join(f"CPU {cpu} ({n} lost)" for cpu, n in self.excluded)
        return f"left out, the agent dropped samples there: {cpus}"


def paired(
    agent: Iterable[AgentSample], perf: Iterable[PerfSample], within_ns: int
) -> list[tuple[AgentSample, PerfSample]]:
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
    agent: Sequence[AgentSample], times: Mapping[int, Sequence[int]], within_ns: int
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
    agent: Iterable[ProfileSample],
    perf: Iterable[PerfSample],
    symbols: Symboliser,
    drops: Mapping[int, int],
    *,
    pair_within_ns: int | None = None,
) -> ProfilePair:
    """Both profiles folded, every CPU with drops (CPU → samples lost) left out of both.

    With ``pair_within_ns``, only `paired` samples, and no CPU is left out (the
    module docstring says why); the agent's samples must then be `AgentSample`s
    with a time.
    """
    if pair_within_ns is not None:
        given = list(agent)
        mine = [s for s in given if isinstance(s, AgentSample)]
        if len(mine) != len(given):
            raise ValueError("paired profiles need the agent's samples as timed AgentSamples")
        theirs = list(perf)
        pairs = paired(mine, theirs, pair_within_ns)
        return ProfilePair(
            agent=fold(agent_stack(a, symbols) for a, _ in pairs),
            perf=fold(perf_stack(p, symbols) for _, p in pairs),
            pairing=(len(pairs), len(mine), len(theirs)),
        )
    excluded = tuple(sorted((cpu, n) for cpu, n in drops.items() if n > 0))
    left_out = {cpu for cpu, _ in excluded}
    return ProfilePair(
        agent=fold(agent_stack(s, symbols) for s in agent if s.cpu not in left_out),
        perf=fold(perf_stack(s, symbols) for s in perf if s.cpu not in left_out),
        excluded=excluded,
    )


def unjudgeable(pair: ProfilePair) -> str:
    """Why PROFILE cannot judge ``pair`` ('' when it can): fewer than `MIN_COMPARED` a side."""
    agent, perf = pair.agent.total, pair.perf.total
    if min(agent, perf) >= MIN_COMPARED:
        return ""
    return (f"too few samples to judge (agent {agent}, perf {perf}; "
            f"PROFILE needs {MIN_COMPARED} a side)")  # fmt: skip


@dataclass(frozen=True, slots=True)
class Homogeneity:
    """A chi-square homogeneity test of two leaf profiles."""

    statistic: float
    df: int
    critical: float  # the statistic's bound at `alpha`
    alpha: float
    categories: tuple[tuple[str, int, int], ...]  # (symbol, agent, perf); "other" last

    @property
    def passed(self) -> bool:
        """Whether the profiles are alike at the test's false-alarm rate."""
        return self.statistic <= self.critical


def compare(
    agent: Mapping[str, int], perf: Mapping[str, int], *, alpha: float = ALPHA
) -> Homogeneity:
    """Chi-square homogeneity of two leaf profiles (the module docstring states the model).

    :raise ValueError: either profile is empty (nothing to compare).
    """
    total_a, total_b = sum(agent.values()), sum(perf.values())
    if total_a <= 0 or total_b <= 0:
        raise ValueError(f"an empty profile: agent {total_a}, perf {total_b} samples")
    categories = _categories(agent, perf, min(total_a, total_b) / (total_a + total_b))
    statistic = 0.0
    for _, a, b in categories:
        pooled = a + b
        for seen, side in ((a, total_a), (b, total_b)):
            expected = side * pooled / (total_a + total_b)
            statistic += (seen - expected) ** 2 / expected
    df = len(categories) - 1
    critical = chi2_quantile(1 - alpha, df) if df > 0 else 0.0
    return Homogeneity(statistic, df, critical, alpha, tuple(categories))


def _categories(
    agent: Mapping[str, int], perf: Mapping[str, int], smaller_share: float
) -> list[tuple[str, int, int]]:
    """Symbols tested alone (enough expected on the smaller side), the rest as ``other``."""
    pooled = Counter(agent) + Counter(perf)
    ranked = sorted(pooled, key=lambda name: (-pooled[name], name))
    kept = [n for n in ranked if pooled[n] * smaller_share >= MIN_EXPECTED][:TOP]
    rest = [n for n in ranked if n not in kept]
    found = [(n, agent.get(n, 0), perf.get(n, 0)) for n in kept]
    other = (OTHER, sum(agent.get(n, 0) for n in rest), sum(perf.get(n, 0) for n in rest))
    if other[1] + other[2] == 0:
        return found
    if (other[1] + other[2]) * smaller_share >= MIN_EXPECTED or not found:
        return [*found, other]
    name, a, b = found[-1]  # too few to stand alone: pooled with the smallest kept
    return [*found[:-1], (f"{name}+{OTHER}", a + other[1], b + other[2])]


def chi2_sf(x: float, df: int) -> float:
    """P(X > x) for X chi-square with ``df`` degrees of freedom (regularised gamma Q)."""
    if x <= 0:
        return 1.0
    return _gamma_q(df / 2, x / 2)


def chi2_quantile(p: float, df: int) -> float:
    """The x with P(X ≤ x) = ``p`` (bisection on `chi2_sf`, to 1e-9 relative)."""
    lo, hi = 0.0, max(1.0, 2.0 * df)
    while chi2_sf(hi, df) > 1 - p:
        hi *= 2
    while hi - lo > 1e-9 * hi:
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if chi2_sf(mid, df) > 1 - p else (lo, mid)
    return hi


def _gamma_q(a: float, x: float) -> float:
    """Regularised upper incomplete gamma Q(a, x): a series below a + 1, else a fraction."""
    log_front = a * math.log(x) - x - math.lgamma(a)
    if x < a + 1:
        term = total = 1.0 / a
        for n in range(1, 1000):
            term *= x / (a + n)
            total += term
            if abs(term) < abs(total) * 1e-15:
                break
        return max(0.0, 1.0 - total * math.exp(log_front))
    # Lentz's method for the continued fraction of Q
    tiny = 1e-300
    b, c, d = x + 1 - a, 1 / tiny, 1 / (x + 1 - a)
    h = d
    for i in range(1, 1000):
        an = -i * (i - a)
        b += 2
        d = an * d + b
        d = tiny if abs(d) < tiny else d
        c = b + an / c
        c = tiny if abs(c) < tiny else c
        d = 1 / d
        h *= d * c
        if abs(d * c - 1) < 1e-15:
            break
    return math.exp(log_front) * h


def top_symbols(pair: ProfilePair, rows: int = 10) -> str:
    """The agent's and perf's top leaf symbols side by side, with their shares."""
    sides = [_ranked(pair.agent), _ranked(pair.perf)]
    width = max([len(name) for side in sides for name, _ in side[:rows]] + [12])
    head = f"{'#':>3}  {'agent':<{width}} {'share':>6}   {'perf':<{width}} {'share':>6}"
    lines = [f"top symbols (leaf): agent {pair.agent.total} samples, perf {pair.perf.total}", head]
    for i in range(min(rows, max(len(sides[0]), len(sides[1])))):
        cells = [_cell(side, i, width) for side in sides]
        lines.append(f"{i + 1:>3}  {cells[0]}   {cells[1]}")
    return "\n".join(lines)


def _ranked(profile: Profile) -> list[tuple[str, float]]:
    total = profile.total or 1
    leaves = profile.leaves()
    return [(n, c / total) for n, c in sorted(leaves.items(), key=lambda kv: (-kv[1], kv[0]))]


def _cell(side: Sequence[tuple[str, float]], i: int, width: int) -> str:
    if i >= len(side):
        return f"{'':<{width}} {'':>6}"
    name, share = side[i]
    return f"{name:<{width}} {100 * share:5.1f}%"
