"""dt's counter laws (seeds-spec §7.3): what the per-CPU statistics and DTIOCGSTATS must say.

DT-O1 (conservation), DT-O2 (no reader before the read), DT-O3's counters (the drain;
the stream's part is `harness.agent.flavours.dt.stream`), DT-O4 (GSTATS), DT-O6
(recursion), DT-O7 (skipped ticks) and DT-INJ (injection), as pure checks on one
`DtRun`; the table and which apply are `harness.agent.flavours.dt.oracles`::

    check_dt_conservation(run)      # [] or Violation("DT-O1", cpu, ...)
    reads_whole_events(run)         # False only with DT-D2 and a ragged read size

Per-CPU laws range over the CPUs of the reading they judge (every possible CPU);
a statistic missing from a reading reads as 0. ``E_c`` is ``x_calls``, the get
calls on CPU c in this open; the core counts the producer calls that make them
(``x_producer_calls``, tied to the kernel's interrupt count by IRQ and CALLS). The
run reads only after RECORD off, so the before-read reading is always a "no reader
yet" state (DT-L4).

Checks removed, and why (issue 23: a check that cannot fail is no check):

- DT-O3's ``x_seq = x_committed`` per CPU: ``dt_fill`` writes the seq and
  ``dt_consume`` raises ``x_committed`` in the same producer call, one after the
  other, with nothing between them that can return; no build can move one without
  the other. The seqs the reader received are the evidence instead: per CPU they
  run 1 … n with no gap and n = ``x_committed`` (`stream.event_seqs`,
  `stream.event_counts`).
- DT-O7's ``dc_skiptick ≥ forced`` under PMU ticks looped over forced skips only,
  and no standard run forces one. It is now DT-L5 on every CPU (`check_dt_skipticks`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeAlias

from harness.agent.flavours.dt.data import DT, DT_RING_SLOTS
from harness.agent.flavours.dt.results import DtOpenStats, DtRun
from harness.agent.flavours.dt.stream import event_counts, event_fields, event_seqs
from harness.agent.oracles.laws import Law, all_at_most, all_equal, sums_to
from harness.agent.values.results import Violation

#: Events one CPU's ring holds: one of the 16 slots always stays free.
CAPACITY = DT_RING_SLOTS - 1
#: Bytes of one event in the read stream.
EVENT_SIZE = DT.record.size
_DT_D1 = DT.quirk_bit("DT-D1")
_DT_D2 = DT.quirk_bit("DT-D2")
_DT_D9 = DT.quirk_bit("DT-D9")
#: (when, reading) pairs, ``when`` as the violations' details say it.
Readings: TypeAlias = tuple[tuple[str, DtOpenStats], ...]


def reads_whole_events(run: DtRun) -> bool:
    """Whether every read returned whole events: false only with DT-D2 and a ragged size.

    Fixed mode reads floor(size / 48) events; the quirk rounds the budget up, which
    only cuts an event short when ``read_size`` is not a multiple of 48.
    """
    return not (run.spec.quirks & _DT_D2 and run.read_size % EVENT_SIZE)


def check_dt_conservation(run: DtRun) -> list[Violation]:
    """DT-O1: the core's producer calls reach the open; DT-L1 and DT-L2 per CPU.

    ``x_calls = x_producer_calls + windows``: each producer call gets once on the
    one recording open, and each nested window the harness opened gets once outside
    the producer; ``x_producer_calls`` is the core's count, which CALLS and IRQ tie
    to the kernel's interrupt count and the harness's injections. Before and after
    the read: ``x_calls = dc_recurevt + dc_dropevt + x_committed`` and
    ``x_committed = dc_readevt + x_inring``.
    """
    violations = []
    stats = run.before_read
    for cpu in sorted(set(stats.percpu) | set(run.core)):
        calls = run.core.get(cpu, {}).get("x_producer_calls", 0)
        windows = run.windows.get(cpu, 0)
        terms = {"x_producer_calls": calls, "nested windows": windows}
        detail = "every producer call and nested window is one get on the open"
        violations += sums_to("DT-O1", cpu, ("x_calls", _get(stats, cpu, "x_calls")), terms, detail)
    for when, stats in _readings(run):
        for cpu in sorted(stats.percpu):
            laws = (
                ("x_calls", ("dc_recurevt", "dc_dropevt", "x_committed"), "DT-L1: every get"),
                ("x_committed", ("dc_readevt", "x_inring"), "DT-L2: every committed event"),
            )
            for total, parts, law in laws:
                terms = {name: _get(stats, cpu, name) for name in parts}
                want = (total, _get(stats, cpu, total))
                violations += sums_to("DT-O1", cpu, want, terms, f"{law}, {when}")
    return violations


def check_dt_no_reader(run: DtRun) -> list[Violation]:
    """DT-O2 (DT-L4), before the read: the first 15 non-recursive gets commit, the rest drop.

    Also: nothing was read yet, and ``x_evtcnt`` = Σ ``x_committed``.
    """
    stats, detail = run.before_read, "DT-L4: no reader before the read"

    def per_cpu(cpu: int) -> list[Violation]:
        calls, recur = _get(stats, cpu, "x_calls"), _get(stats, cpu, "dc_recurevt")
        committed = min(calls - recur, CAPACITY)
        dropped = calls - recur - committed
        laws = [
            Law("x_committed", committed, _get(stats, cpu, "x_committed"),
                f"min({calls} - {recur}, {CAPACITY}) = {committed}"),
            Law("dc_dropevt", dropped, _get(stats, cpu, "dc_dropevt"),
                f"{calls} - {recur} - {committed} = {dropped}"),
            Law("dc_readevt", 0, _get(stats, cpu, "dc_readevt")),
        ]  # fmt: skip
        return all_equal("DT-O2", cpu, laws, detail)

    total = _total(stats, "x_committed")
    evtcnt = Law("x_evtcnt", total, stats.open.get("x_evtcnt", 0), f"Σ x_committed = {total}")
    return [
        *(v for cpu in sorted(stats.percpu) for v in per_cpu(cpu)),
        *all_equal("DT-O2", None, [evtcnt], detail),
    ]


def check_dt_drain(run: DtRun) -> list[Violation]:
    """DT-O3, after the read: the rings are empty and the events are the committed ones.

    Counters: ``dc_readevt = x_committed`` per CPU, ``x_evtcnt = 0``. Whole-event
    reads (`reads_whole_events`): bytes = 48 × Σ ``dc_readevt`` = 48 × events, no
    event was partial, the events of CPU c number ``x_committed_c`` with seq 1, 2,
    3, … in read order (one reader; readers racing each other are DT-O10's), and
    every event's canary matches its seq, its CPU was online and its probe is the
    profile probe. Ragged DT-D2 reads cut events in the middle of the stream, which
    then no longer decodes event by event: only bytes ≤ 48 × Σ ``dc_readevt`` (and as
    many events) is checked there.
    """
    violations = [*_drain_counters(run), *_drain_totals(run)]
    if reads_whole_events(run):
        one_reader = run.concurrent_readers < 2
        violations += [*event_counts(run), *(event_seqs(run) if one_reader else ())]
        violations += event_fields(run)
    return violations


def check_dt_gstats(run: DtRun) -> list[Violation]:
    """DT-O4, before and after the read: DTIOCGSTATS against the per-CPU counters.

    readevt and dropevt are sums; skiptick and recurevt are sums too, or with quirk
    DT-D1 the values of the highest CPU (the seed assigns inside its CPU loop).
    """
    violations = []
    for when, stats in _readings(run):
        violations += all_equal("DT-O4", None, gstats_laws(run, stats), f"DTIOCGSTATS {when}")
    return violations


def gstats_laws(run: DtRun, stats: DtOpenStats) -> list[Law]:
    """DT-O4's laws over one reading: each DTIOCGSTATS field against what it must be."""
    last_only = bool(run.spec.quirks & _DT_D1)
    last = max(stats.percpu, default=None)
    laws = []
    for name in DT.stat_names:
        percpu_name = f"dc_{name}"
        if last_only and name in {"skiptick", "recurevt"}:
            value = 0 if last is None else _get(stats, last, percpu_name)
            text = f"{percpu_name}[{last}] = {value} (quirk DT-D1: the last CPU's)"
        else:
            value = _total(stats, percpu_name)
            text = f"Σ {percpu_name} = {value}"
        laws.append(Law(name, value, stats.gstats.get(name, 0), text))
    return laws


def check_dt_recursion(run: DtRun) -> list[Violation]:
    """DT-O6: ``dc_recurevt_c`` = the calls that landed in nested windows on c, else 0."""
    detail = "every call inside a nested window recurs; no other call can"
    return _exact("DT-O6", run, ("dc_recurevt", run.nested, "calls in nested windows"), detail)


def check_dt_skipticks(run: DtRun) -> list[Violation]:
    """DT-O7: skipped ticks are the forced ones, plus the periods the kernel never raised.

    Overflows that only carry bursts (``pmu_produce`` off) are not ticks, so then
    ``dc_skiptick_c`` = the forced skips exactly (with quirk DT-D9 modulo 2^32, as a
    32-bit counter holds them). With profile ticks, DT-L5: of the P periods the PMU
    counted on c (its final count ÷ period, read when the event was released),
    every one ended in an overflow the kernel delivered (``/proc/interrupts``) or is
    a skipped tick, except those still pending when the event stopped (no producer
    call came after them to count them)::

        dc_skiptick_c = forced_c + P_c - irqs_c - x_periods_pending_at_stop_c  (+ 1)

    The + 1: the core counts a period per overflow and finds skipped ones from the
    count (``floor(count / period)``), but once a late overflow shifted the period
    boundaries off the multiples of the period, an overflow can come just before the
    count reaches the next multiple. The core's tally then runs one period ahead of
    the final count, never more (each overflow's boundary is a full period past the
    last), and nothing was pending. Seen here: 1 CPU-run in 16 (P 4045, 2218 irqs,
    1828 skipped). Judged on CPUs whose event was created once (a CPU that went
    offline and back had two events, whose counts do not add up to periods).
    """
    if not run.spec.pmu_produce:
        detail = "overflows carry bursts only: skipped ticks are the forced ones"
        mask = 0xFFFFFFFF if run.spec.quirks & _DT_D9 else None
        forced = {cpu: n & mask if mask else n for cpu, n in run.skips.items()}
        return _exact("DT-O7", run, ("dc_skiptick", forced, "forced skips"), detail)
    violations = []
    detail = "DT-L5: every period the PMU counted was delivered, skipped or pending"
    for cpu in sorted(run.before_read.percpu):
        want = periods_skipped(run, cpu)
        got = _get(run.before_read, cpu, "dc_skiptick")
        if want is None or want[0] <= got <= want[0] + want[1]:
            continue
        low, ahead, text = want
        expected = f"dc_skiptick = {text}" + (f" (or {low + 1}: a period ahead)" if ahead else "")
        violations.append(Violation("DT-O7", cpu, expected, f"dc_skiptick = {got}", detail))
    return violations


def periods_skipped(run: DtRun, cpu: int) -> tuple[int, int, str] | None:
    """DT-L5 on ``cpu``: (skipped ticks, 1 if one more may be, how); None where not judged."""
    core = run.core.get(cpu, {})
    irqs = run.kernel.delta(cpu) if run.kernel else None
    if run.kernel is not None and run.kernel.pmu_shared:
        # perf beside the agent (the peer run): the kernel also counts interrupts that
        # raised perf's counter only; the agent's overflows are its own x_nmi_total,
        # tied there to the kernel's count (IRQ: ≤) and to perf's samples (PEER).
        irqs = core.get("x_nmi_total", 0)
    if irqs is None or core.get("x_events_created", 0) != 1:
        return None
    periods = core.get("x_counter_value", 0) // run.spec.period
    pending, forced = core.get("x_periods_pending_at_stop", 0), run.skips.get(cpu, 0)
    want = forced + periods - irqs - pending
    text = f"{forced} forced + {periods} periods - {irqs} irqs - {pending} pending = {want}"
    return want, 0 if pending else 1, text


def check_dt_injection(run: DtRun) -> list[Violation]:
    """DT-INJ: ``x_calls_c`` = injected + nested + 1 outer get per nested window on c."""
    injected = run.injected or {}
    stats = run.before_read
    violations = []
    for cpu in sorted(set(stats.percpu) | set(injected) | set(run.nested)):
        inj, nest = injected.get(cpu, 0), run.nested.get(cpu, 0)
        outer = run.windows.get(cpu, 0)
        want = inj + nest + outer
        text = f"{inj} + {nest} + {outer} = {want} (injected + nested + outer get)"
        law = Law("x_calls", want, _get(stats, cpu, "x_calls"), text)
        violations += all_equal("DT-INJ", cpu, [law], "only the harness's calls reach the producer")
    return violations


def _drain_counters(run: DtRun) -> list[Violation]:
    stats, detail = run.after_read, "after reading everything"
    violations = []
    for cpu in sorted(stats.percpu):
        committed = _get(stats, cpu, "x_committed")
        law = Law("dc_readevt", committed, _get(stats, cpu, "dc_readevt"),
                  f"x_committed = {committed}")  # fmt: skip
        violations += all_equal("DT-O3", cpu, [law], detail)
    partial = stats.open.get("x_partial_events", 0)
    laws = [Law("x_evtcnt", 0, stats.open.get("x_evtcnt", 0))]
    if reads_whole_events(run):
        laws.append(Law("x_partial_events", 0, partial, "0 (whole-event reads)"))
    return violations + all_equal("DT-O3", None, laws, detail)


def _drain_totals(run: DtRun) -> list[Violation]:
    read = _total(run.after_read, "dc_readevt")
    laws = [
        Law("bytes_read", EVENT_SIZE * read, run.bytes_read,
            f"{EVENT_SIZE} × {read} (Σ dc_readevt)"),
        Law("events", read, len(run.events), f"Σ dc_readevt = {read}"),
    ]  # fmt: skip
    if reads_whole_events(run):
        return all_equal("DT-O3", None, laws, f"reads of {run.read_size} bytes: whole events")
    detail = f"DT-D2 reads of {run.read_size} bytes cut events, consumed and counted"
    return all_at_most("DT-O3", None, laws, detail)


def _exact(
    oracle: str, run: DtRun, law: tuple[str, Mapping[int, int], str], detail: str
) -> list[Violation]:
    """Before the read, per CPU: statistic ``name`` = ``counts[c]`` (0 where absent)."""
    name, counts, what = law
    stats, violations = run.before_read, []
    for cpu in sorted(set(stats.percpu) | set(counts)):
        want = counts.get(cpu, 0)
        found = Law(name, want, _get(stats, cpu, name), f"{want} ({what})")
        violations += all_equal(oracle, cpu, [found], detail)
    return violations


def _readings(run: DtRun) -> Readings:
    return (("before the read", run.before_read), ("after the read", run.after_read))


def _get(stats: DtOpenStats, cpu: int, name: str) -> int:
    return stats.percpu.get(cpu, {}).get(name, 0)


def _total(stats: DtOpenStats, name: str) -> int:
    return sum(_get(stats, cpu, name) for cpu in stats.percpu)
