"""KCSAN's own counters and knobs in a kcsan guest, and whether a case could have seen a race.

KCSAN finds a race only when two accesses meet: one CPU's plain access is *watched*
(KCSAN picks one instrumented access in ``(skip_watch + 3) / 2``, then stalls it for
up to ``udelay_task`` µs in a task or ``udelay_interrupt`` µs in an interrupt or NMI)
and another CPU touches the same bytes inside that stall, or changes them (a race "at
unknown origin"). A marked access (``READ_ONCE``, ``smp_load_acquire``) never sets a
watchpoint; it only finds one. A run that set no watchpoint could not have seen any
race: its clean console proves nothing. `KcsanWatch` says so::

    before = parse_kcsan_stats(shell.run(f"cat {KCSAN_DEBUGFS}").stdout)
    ...                                         # the case's runs, spinners beside
    watch = KcsanWatch("dt kcsan", OVERLAP, before.until(after), spinner_reads=4000)
    watch.unjudged_reason()                      # '' when it could have seen a race

**The overlap model** (`OVERLAP`). A racy access executed ``n`` times is watched
``W = 2n / (skip_watch + 3)`` times (`watched_share`); each watch lasts ``D/2`` on
average (the delay is randomised down from ``D``); the other side, touching the same
address ``r`` times a second from another vCPU (`reads_meeting`), falls inside one with
probability ``q = 1 - exp(-r D / 2)``; the race is seen with probability
``1 - (1 - q)^W`` (`p_seen`); the expected number of meetings is about
``n r D / (skip_watch + 3)``. That is an upper bound here: under TCG two vCPUs run at the
same instant only while both their threads hold a host core, and on 2 host cores shared
with other guests that is a fraction of the time. Measured in dt's overlap run with
the spinners' plain reads watched (mutant plain_stats_read, 40000 spinner passes):
8 meetings with a producer's store, where the model, with about 1600 watched reads and
a store every 250 to 500 us, gives hundreds. What bounds the
settings is the stall: a producer call of about 100 instrumented accesses is watched
twice at skip_watch 100, 100 us of a 250 us period; while a run is stall-bound the
meetings grow with the spinners' rate ``r`` only, whatever ``skip_watch`` and ``D``,
so the spinners read in the kernel (`harness.agent.overlap`).

Two limits measured on arm64 (6.1): ``smp_load_acquire`` and the store of
``smp_store_release`` are inline asm that KCSAN does not instrument, so they never find
a watchpoint: a plain store is seen only by a ``READ_ONCE`` (or plain) reader, a plain
load only through the value a release store changes. A case's counters
(``setup_watchpoints``, ``data_races``, ``races_unknown_origin``) and its spinner passes
are reported beside its verdict.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, fields

#: KCSAN's debugfs file: "enabled: 1", then one "name: value" line per counter.
KCSAN_DEBUGFS = "/sys/kernel/debug/kcsan"
#: KCSAN's runtime knobs (kernel/kcsan/core.c's module_param_named).
KCSAN_PARAMS = "/sys/module/kcsan/parameters"
_LINE = re.compile(r"^(?P<name>\w+): (?P<value>-?\d+)$", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class KcsanSettings:
    """KCSAN's watch rate and stalls for a case (module parameters, writable at run time)."""

    skip_watch: int  # one watched access in (skip_watch + 3) / 2 (randomised: `watched_share`)
    udelay_task_us: int  # a watch's stall in a task
    udelay_interrupt_us: int  # a watch's stall in an interrupt or NMI

    def commands(self) -> tuple[str, ...]:
        """Shell commands that set them in the guest."""
        values = (self.skip_watch, self.udelay_task_us, self.udelay_interrupt_us)
        return tuple(f"echo {value} > {KCSAN_PARAMS}/{name}"
                     for name, value in zip(KNOBS, values, strict=True))  # fmt: skip


#: The knobs `KcsanSettings` sets, by their names under `KCSAN_PARAMS`, in its fields' order.
KNOBS = ("skip_watch", "udelay_task", "udelay_interrupt")
#: Prints the knobs' values, one a line, in `KNOBS`' order (`parse_settings` reads it).
READ_SETTINGS = "cat " + " ".join(f"{KCSAN_PARAMS}/{name}" for name in KNOBS)


def parse_settings(text: str) -> KcsanSettings:
    """`READ_SETTINGS`' output → the settings the guest has now.

    :raise ValueError: the text is not one integer for each of `KNOBS`.
    """
    words = text.split()
    if len(words) != len(KNOBS) or not all(re.fullmatch(r"-?\d+", w) for w in words):
        raise ValueError(f"not KCSAN's {', '.join(KNOBS)}: {text[:200]!r}")
    skip, task, interrupt = map(int, words)
    return KcsanSettings(skip, task, interrupt)


#: The mutant guest's and the kcsan tier's overlap watches (see the module's model).
OVERLAP = KcsanSettings(skip_watch=100, udelay_task_us=200, udelay_interrupt_us=100)


def watched_share(settings: KcsanSettings) -> float:
    """The share of a CPU's instrumented accesses KCSAN watches: ``2 / (skip_watch + 3)``.

    kernel/kcsan/core.c (6.1, 6.12): after each watch ``reset_kcsan_skip`` sets the CPU's
    count to ``skip_watch - prandom_u32_max(skip_watch)``, uniform on 1..skip_watch
    (CONFIG_KCSAN_SKIP_WATCH_RANDOMIZE, set in the kcsan kernel), and ``should_watch``
    watches the access that takes it below 0: one in ``count + 1``, ``(skip_watch + 3) / 2``
    on average (``2 / skip_watch`` before: 3 % too generous at 100).
    """
    return 2 / (settings.skip_watch + 3)


def p_seen(executions: int, rate_hz: float, settings: KcsanSettings, *, in_nmi: bool) -> float:
    """The model's chance that a race of an access run ``executions`` times is seen.

    The other side touches the address from another CPU at ``rate_hz`` for the whole run.
    """
    delay_s = (settings.udelay_interrupt_us if in_nmi else settings.udelay_task_us) * 1e-6
    watched = executions * watched_share(settings)
    hit = 1 - math.exp(-rate_hz * delay_s / 2)
    return float(1 - (1 - hit) ** watched)


#: A pair is met when the model's chance that its race would have been seen is this high.
PAIR_MET_P = 0.95
#: The expected meetings that make `PAIR_MET_P`: ``1 - exp(-m) = p`` (about 3.0).
MEETINGS_MET = -math.log(1 - PAIR_MET_P)


def co_scheduled(vcpus: int, cores: int) -> float:
    """The share of time two given vCPU threads both hold a host core (all runnable).

    Under TCG two vCPUs run at the same instant only then; with ``vcpus`` runnable
    threads on ``cores`` cores each holds one ``cores / vcpus`` of the time, the two
    ``cores (cores - 1) / (vcpus (vcpus - 1))``. An upper bound where vCPUs also idle.
    """
    if vcpus <= cores:
        return 1.0
    return cores * (cores - 1) / (vcpus * (vcpus - 1)) if cores > 1 else 0.0


@dataclass(frozen=True, slots=True)
class PairCover:
    """One declared pair over a case: its writer's executions and the model's chance."""

    name: str
    executions: int  # the writer's, over the case, on every CPU
    meetings: float  # expected watches of the writer that a spinner's read fell into
    p_seen: float  # 1 - exp(-meetings)

    @property
    def met(self) -> bool:
        """Whether a race of this pair would have been seen with at least `PAIR_MET_P`."""
        return self.p_seen >= PAIR_MET_P

    def plus(self, other: PairCover) -> PairCover:
        """The pair over this case and ``other`` (another case's): meetings add up."""
        meetings = self.meetings + other.meetings
        return PairCover(self.name, self.executions + other.executions, meetings,
                         1 - math.exp(-meetings))  # fmt: skip

    def rounds_needed(self, per_round: PairCover) -> int | None:
        """Rounds like ``per_round`` the model expects to make this pair met (0: met).

        The writes still needed for `MEETINGS_MET`, at the rate of writes a round and
        meetings a write (its spinners' reads a second, their share of the host) that
        ``per_round`` measured. None: a round met nothing (its writer did not run).
        """
        missing = MEETINGS_MET - self.meetings
        if missing <= 0:
            return 0
        return math.ceil(missing / per_round.meetings) if per_round.meetings > 0 else None

    def describe(self) -> str:
        """``dt index: 12000 writes, 3.1 expected meetings, p 0.95: met``."""
        verdict = "met" if self.met else f"UNJUDGED (p below {PAIR_MET_P})"
        return (f"{self.name}: {self.executions} writes, {self.meetings:.2f} expected "
                f"meetings, p {self.p_seen:.3f}: {verdict}")  # fmt: skip


def reads_meeting(reads_per_s: float, vcpus: int, *, in_nmi: bool) -> float:
    """Of the spinners' reads a second on ``vcpus``, those that can meet a pair's writer.

    A writer in NMI stalls its own vCPU for its watch, so a spinner there cannot read
    then: only the reads made on the other vCPUs count, ``(vcpus - 1) / vcpus`` of them
    with the spinners on any vCPU alike (none on one vCPU; before, every read counted:
    twice too many on 2 vCPUs). A task writer's reads all count.
    """
    if not in_nmi:
        return reads_per_s
    return reads_per_s * (vcpus - 1) / vcpus if vcpus > 0 else 0.0


def pair_cover(name: str, executions: int, *, in_nmi: bool, reads_per_s: float,
               settings: KcsanSettings, share: float) -> PairCover:  # fmt: skip
    """The overlap model for one pair (the module's): its writer ``executions`` times.

    Each write is watched with chance `watched_share` and stalls ``D/2`` on average; a
    spinner reads the variable ``reads_per_s`` times a host second, at the same instant
    only a ``share`` of the time (`co_scheduled`); the meetings expected are
    ``W x (1 - exp(-r share D / 2))`` and a race is seen with ``1 - exp(-meetings)``.
    """
    delay_s = (settings.udelay_interrupt_us if in_nmi else settings.udelay_task_us) * 1e-6
    watched = executions * watched_share(settings)
    meetings = watched * (1 - math.exp(-reads_per_s * share * delay_s / 2))
    return PairCover(name, executions, meetings, 1 - math.exp(-meetings))


@dataclass(frozen=True, slots=True)
class KcsanCounts:
    """KCSAN's counters (kernel/kcsan/debugfs.c), or the change of each over a case."""

    enabled: int = 0
    used_watchpoints: int = 0
    setup_watchpoints: int = 0
    data_races: int = 0
    assert_failures: int = 0
    no_capacity: int = 0
    report_races: int = 0
    races_unknown_origin: int = 0
    unencodable_accesses: int = 0
    encoding_false_positives: int = 0

    def until(self, later: KcsanCounts) -> KcsanCounts:
        """Each counter's change from this reading to ``later`` (``enabled``: later's)."""
        values = {f.name: getattr(later, f.name) - getattr(self, f.name) for f in fields(self)}
        values["enabled"] = later.enabled
        return KcsanCounts(**values)


def parse_kcsan_stats(text: str) -> KcsanCounts:
    """``cat /sys/kernel/debug/kcsan`` → `KcsanCounts` (unknown names are ignored).

    :raise ValueError: the text holds no counter (not KCSAN's file).
    """
    known = {f.name for f in fields(KcsanCounts)}
    values = {m["name"]: int(m["value"]) for m in _LINE.finditer(text) if m["name"] in known}
    if "setup_watchpoints" not in values:
        raise ValueError(f"no KCSAN counters in {text[:200]!r}")
    return KcsanCounts(**values)


@dataclass(frozen=True, slots=True)
class KcsanWatch:
    """What KCSAN did over one watch: its settings, counters, and the spinners' reads."""

    title: str  # what ran under it: the flavour and its runs
    settings: KcsanSettings
    counts: KcsanCounts  # the change over the watch
    spinner_reads: int  # passes over every CPU's indices and state (harness.agent.overlap)
    seconds: float = 0.0  # the watch's host time, while the spinners ran

    @property
    def reads_per_s(self) -> float:
        """The spinners' passes a host second (each reads every CPU's variables once)."""
        return self.spinner_reads / self.seconds if self.seconds > 0 else 0.0

    @property
    def races(self) -> int:
        """Races KCSAN counted (a watchpoint consumed, or a value changed under it).

        Only the agent is instrumented, so every one has the agent's access on a side.
        Counted races are a finding even where no report reached the console (seen:
        dt's plain_ring_index, data_races 2 and no report printed).
        """
        return self.counts.data_races + self.counts.races_unknown_origin

    def unjudged_reason(self) -> str:
        """Why this case could not have seen a race ('' when it could)."""
        if not self.counts.enabled:
            return "KCSAN was disabled (debugfs 'enabled: 0')"
        if self.counts.setup_watchpoints <= 0:
            return "KCSAN set no watchpoint: no access of the agent was watched"
        if self.spinner_reads <= 0:
            return "no spinner read the indices: no reader overlapped the producers"
        return ""

    def describe(self, covers: Sequence[PairCover] = ()) -> str:
        """One line: the case, its watchpoints and races, its settings, its verdict.

        With ``covers`` (the declared pairs, `pair_cover`), the verdict counts the pairs
        met and names the others UNJUDGED: watchpoints overall show only that KCSAN
        watched something, not that a given writer met a reader inside a watch.
        """
        c, s = self.counts, self.settings
        why = self.unjudged_reason()
        met = [cover.name for cover in covers if cover.met]
        unmet = [cover.name for cover in covers if not cover.met]
        if why:
            verdict = f"UNJUDGED ({why})"
        elif covers:
            verdict = (f"could see a race on {len(met)} of {len(covers)} declared pairs"
                       + (f"; UNJUDGED: {', '.join(unmet)}" if unmet else ""))  # fmt: skip
        else:
            verdict = "could see a race somewhere (no pair declared: watchpoints overall)"
        return (f"KCSAN {self.title}: {c.setup_watchpoints} watchpoints set, "
                f"{c.data_races} found a racing access ({c.races_unknown_origin} of unknown "
                f"origin), {c.no_capacity} without capacity; {self.spinner_reads} spinner "
                f"reads; skip_watch {s.skip_watch}, udelay_task {s.udelay_task_us} us, "
                f"udelay_interrupt {s.udelay_interrupt_us} us: {verdict}")  # fmt: skip
