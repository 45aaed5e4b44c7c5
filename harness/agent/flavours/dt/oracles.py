"""The dt oracles of seeds-spec §7.3, as pure checks on one `DtRun`.

Each ``check_dt_*`` returns every way the run breaks its law as readable `Violation`
values (an empty list means pass); `check_dt` runs every applicable one, so a broken
law never hides the others::

    violations = check_dt(run)
    {v.oracle for v in violations}          # {"DT-O3"}
    for name, description in DT_ORACLES:    # report order
        ...

Per-CPU laws range over the CPUs of the snapshot they judge (every possible CPU);
a statistic missing from a snapshot reads as 0. ``E_c`` is ``x_calls``, the get
calls on CPU c in this open. The run reads only after RECORD off, so the
before-read snapshot is always a "no reader yet" state (DT-L4).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from typing import TypeAlias

from harness.agent.core_oracles import (
    CORE_ORACLES,
    CoreView,
    applicable_core,
    check_core,
    with_peer,
)
from harness.agent.core_oracles import check_nmi_context as nmi_context
from harness.agent.flavours.dt.data import DT, DT_RING_SLOTS
from harness.agent.flavours.dt.results import DtEvent, DtOpenStats, DtRun
from harness.agent.results import Violation
from harness.errors import ConfigError

#: Oracle names and one-line descriptions, in report order.
DT_ORACLES: tuple[tuple[str, str], ...] = (
    *CORE_ORACLES,
    ("DT-O1", "conservation: every get call recurs, drops or commits; committed = read + inring"),
    ("DT-O2", "no reader before the read: committed = min(E - recurevt, 15), the rest dropped"),
    ("DT-O3", "drain: every committed event read once, whole, in seq order, canary intact"),
    ("DT-O4", "GSTATS: sums of the per-CPU counters (DT-D1: skiptick, recurevt of the last CPU)"),
    ("DT-O6", "recursion: calls inside a nested window count as recurevt, nothing else does"),
    ("DT-O7", "skipped ticks: every forced skip counted (exactly, when overflows are no ticks)"),
    ("DT-O8", "a reader racing the producers never gets 0 bytes: it ends at its time limit"),
    ("DT-INJ", "injection: get calls = injected + nested + one outer get per nested window"),
    ("NMI", "overflow context matches the pseudo-NMI mode the guest booted with"),
)

#: Events one CPU's ring holds: one of the 16 slots always stays free.
CAPACITY = DT_RING_SLOTS - 1
#: Bytes of one event in the read stream.
EVENT_SIZE = DT.record.size
#: The canary of an event with seq 0; each event's is this ^ the low 32 bits of its seq.
CANARY = 0xD7E7C0DE
PROBE_PROFILE = 1
_DT_D1 = DT.quirk_bit("DT-D1")
_DT_D2 = DT.quirk_bit("DT-D2")
#: (name, expected text, expected value, observed value) of one law.
Law: TypeAlias = tuple[str, str, int, int]
#: (when, snapshot) pairs, ``when`` as the violations' details say it.
Snapshots: TypeAlias = tuple[tuple[str, DtOpenStats], ...]


def canary_of(seq: int) -> int:
    """The canary the module writes last into the event with sequence number ``seq``."""
    return CANARY ^ (seq & 0xFFFFFFFF)


def reads_whole_events(run: DtRun) -> bool:
    """Whether every read returned whole events: false only with DT-D2 and a ragged size.

    Fixed mode reads floor(size / 48) events; the quirk rounds the budget up, which
    only cuts an event short when ``read_size`` is not a multiple of 48.
    """
    return not (run.spec.quirks & _DT_D2 and run.read_size % EVENT_SIZE)


def applicable_dt_oracles(run: DtRun) -> frozenset[str]:
    """Names of the oracles `check_dt` evaluates for ``run``.

    DT-INJ needs an injection run without PMU-produced ticks (``pmu_produce`` off);
    DT-O2 (no reader) does not hold when a reader ran while recording.
    """
    core = {name for name, _ in CORE_ORACLES}
    names = {name for name, _ in DT_ORACLES} - core | applicable_core(core_view(run))
    if not run.reader_during_recording:
        names.discard("DT-O8")
    if run.injected is None or run.spec.pmu_produce:
        names.discard("DT-INJ")
    if run.reader_during_recording:
        names.discard("DT-O2")
    return frozenset(names)


def check_dt(run: DtRun) -> list[Violation]:
    """Every violation of every oracle that applies to ``run``, in `DT_ORACLES` order.

    :raise ConfigError: the run's flavour is not dt (these are dt's oracles).
    """
    if run.spec.flavour != DT.name:
        raise ConfigError(f"check_dt holds dt's oracles; the run's flavour is {run.spec.flavour!r}")
    applicable = applicable_dt_oracles(run)
    own = [v for name, _ in DT_ORACLES if name in applicable and name in _CHECKS
           for v in _CHECKS[name](run)]  # fmt: skip
    return [*check_core(core_view(run)), *own]


def core_view(run: DtRun) -> CoreView:
    """What the shared oracles (`harness.agent.core_oracles`) read of a dt run."""
    view = CoreView(spec=run.spec, core=run.core, kernel=run.kernel,
                    injections=run.injections, throttling_disabled=True)  # fmt: skip
    return with_peer(view, run.peer)


def check_dt_conservation(run: DtRun) -> list[Violation]:
    """DT-O1, before and after the read: DT-L1 and DT-L2 per CPU.

    ``x_calls = dc_recurevt + dc_dropevt + x_committed`` and
    ``x_committed = dc_readevt + x_inring``.
    """
    violations = []
    for when, stats in _snapshots(run):
        for cpu in sorted(stats.percpu):
            laws = (
                ("x_calls", ("dc_recurevt", "dc_dropevt", "x_committed"), "DT-L1: every get"),
                ("x_committed", ("dc_readevt", "x_inring"), "DT-L2: every committed event"),
            )
            for total, parts, law in laws:
                violations += _sum_law("DT-O1", stats, cpu, (total, parts), f"{law}, {when}")
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
        want = (
            ("x_committed", f"min({calls} - {recur}, {CAPACITY}) = {committed}", committed),
            ("dc_dropevt", f"{calls} - {recur} - {committed} = {dropped}", dropped),
            ("dc_readevt", "0", 0),
        )
        laws = [(name, text, value, _get(stats, cpu, name)) for name, text, value in want]
        return _equal("DT-O2", cpu, laws, detail)

    total = _total(stats, "x_committed")
    evtcnt = stats.open.get("x_evtcnt", 0)
    return [
        *(v for cpu in sorted(stats.percpu) for v in per_cpu(cpu)),
        *_equal("DT-O2", None, [("x_evtcnt", f"Σ x_committed = {total}", total, evtcnt)], detail),
    ]


def check_dt_drain(run: DtRun) -> list[Violation]:
    """DT-O3, after the read: the rings are empty and the events are the committed ones.

    Counters: ``dc_readevt = x_committed = x_seq`` per CPU, ``x_evtcnt = 0``.
    Whole-event reads (`reads_whole_events`): bytes = 48 × Σ ``dc_readevt`` = 48 ×
    events, no event was partial, the events of CPU c number ``x_committed_c`` with
    seq 1, 2, 3, … in read order, and every event's canary matches its seq, its CPU
    was online and its probe is the profile probe. Ragged DT-D2 reads cut events in
    the middle of the stream, which then no longer decodes event by event: only
    bytes ≤ 48 × Σ ``dc_readevt`` (and as many events) is checked there.
    """
    violations = [*_drain_counters(run), *_drain_totals(run)]
    if reads_whole_events(run):
        violations += [*_event_counts(run), *_event_seqs(run), *_event_fields(run)]
    return violations


def check_dt_gstats(run: DtRun) -> list[Violation]:
    """DT-O4, before and after the read: DTIOCGSTATS against the per-CPU counters.

    readevt and dropevt are sums; skiptick and recurevt are sums too, or with quirk
    DT-D1 the values of the highest CPU (the seed assigns inside its CPU loop).
    """
    last_only = bool(run.spec.quirks & _DT_D1)
    violations = []
    for when, stats in _snapshots(run):
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
            laws.append((name, text, value, stats.gstats.get(name, 0)))
        violations += _equal("DT-O4", None, laws, f"DTIOCGSTATS {when}")
    return violations


def check_dt_recursion(run: DtRun) -> list[Violation]:
    """DT-O6: ``dc_recurevt_c`` = the calls that landed in nested windows on c, else 0."""
    detail = "every call inside a nested window recurs; no other call can"
    return _exact("DT-O6", run, ("dc_recurevt", run.nested, "calls in nested windows"), detail)


def check_dt_skipticks(run: DtRun) -> list[Violation]:
    """DT-O7: every tick the skip hook forced is counted in ``dc_skiptick``.

    Overflows that only carry bursts (``pmu_produce`` off) are not ticks, so then
    ``dc_skiptick_c`` = the forced skips exactly. With profile ticks the port also
    counts the periods the emulator never delivered as skipped ticks (the seed's
    late clock); how many periods elapsed has no measure here independent of the
    counter being checked (under TCG the counter and the perf core's enabled time
    drift apart by tens of ms on oversubscribed vCPUs), so that part is reported
    with the delivered share and only ``dc_skiptick_c ≥ forced`` is judged.
    """
    if not run.spec.pmu_produce:
        detail = "overflows carry bursts only: skipped ticks are the forced ones"
        return _exact("DT-O7", run, ("dc_skiptick", run.skips, "forced skips"), detail)
    detail = "a forced skip is always counted; undelivered periods come on top"
    return [
        Violation("DT-O7", cpu, f"dc_skiptick ≥ {forced} forced", f"{counted}", detail)
        for cpu, forced in sorted(run.skips.items())
        if (counted := _get(run.before_read, cpu, "dc_skiptick")) < forced
    ]


def check_dt_reader(run: DtRun) -> list[Violation]:
    """DT-O8: the background reader ended at its time limit, never on a 0-byte read.

    dt has no EOF: while recording, a read blocks until events come. A read that
    returns 0 bytes (DT-D5: the count went below zero) ends profctl's reader early.
    """
    end = run.background_errno
    if end == "EINTR":
        return []
    detail = "profctl's reader stops at a 0-byte read (errno 0) or a failure"
    return [Violation("DT-O8", None, "reader ended by its time limit (EINTR)", f"{end}", detail)]


def check_dt_injection(run: DtRun) -> list[Violation]:
    """DT-INJ: ``x_calls_c`` = injected + nested + 1 outer get if c had a nested window."""
    injected = run.injected or {}
    stats = run.before_read
    violations = []
    for cpu in sorted(set(stats.percpu) | set(injected) | set(run.nested)):
        inj, nest = injected.get(cpu, 0), run.nested.get(cpu, 0)
        outer = 1 if cpu in run.nested else 0
        want = inj + nest + outer
        text = f"{inj} + {nest} + {outer} = {want} (injected + nested + outer get)"
        law = [("x_calls", text, want, _get(stats, cpu, "x_calls"))]
        violations += _equal("DT-INJ", cpu, law, "only the harness's calls reach the producer")
    return violations


def check_dt_nmi(run: DtRun) -> list[Violation]:
    """NMI: `harness.agent.core_oracles.check_nmi_context` on the run's core counters."""
    return nmi_context(run.core, run.nmi_expected)


_CHECKS: dict[str, Callable[[DtRun], list[Violation]]] = {
    "DT-O1": check_dt_conservation,
    "DT-O2": check_dt_no_reader,
    "DT-O3": check_dt_drain,
    "DT-O4": check_dt_gstats,
    "DT-O6": check_dt_recursion,
    "DT-O7": check_dt_skipticks,
    "DT-O8": check_dt_reader,
    "DT-INJ": check_dt_injection,
    "NMI": check_dt_nmi,
}


def _drain_counters(run: DtRun) -> list[Violation]:
    stats, detail = run.after_read, "after reading everything"
    violations = []
    for cpu in sorted(stats.percpu):
        committed = _get(stats, cpu, "x_committed")
        laws = [
            (name, f"x_committed = {committed}", committed, _get(stats, cpu, name))
            for name in ("dc_readevt", "x_seq")
        ]
        violations += _equal("DT-O3", cpu, laws, detail)
    partial = stats.open.get("x_partial_events", 0)
    laws = [("x_evtcnt", "0", 0, stats.open.get("x_evtcnt", 0))]
    if reads_whole_events(run):
        laws.append(("x_partial_events", "0 (whole-event reads)", 0, partial))
    return violations + _equal("DT-O3", None, laws, detail)


def _drain_totals(run: DtRun) -> list[Violation]:
    read = _total(run.after_read, "dc_readevt")
    laws = [
        ("bytes_read", f"{EVENT_SIZE} × {read} (Σ dc_readevt)", EVENT_SIZE * read, run.bytes_read),
        ("events", f"Σ dc_readevt = {read}", read, len(run.events)),
    ]
    if reads_whole_events(run):
        return _equal("DT-O3", None, laws, f"reads of {run.read_size} bytes: whole events")
    detail = f"DT-D2 reads of {run.read_size} bytes cut events, consumed and counted"
    return _at_most("DT-O3", None, laws, detail)


def _event_counts(run: DtRun) -> list[Violation]:
    counts = Counter(event.cpu for event in run.events)
    stats, violations = run.after_read, []
    for cpu in sorted(set(stats.percpu) | set(counts)):
        committed = _get(stats, cpu, "x_committed")
        law = [("events", f"x_committed = {committed}", committed, counts[cpu])]
        violations += _equal("DT-O3", cpu, law, "events read whose cpu is this CPU")
    return violations


def _event_seqs(run: DtRun) -> list[Violation]:
    """Per CPU, seqs in read order: 1, 2, 3, …; a gap, repeat or decrease is reported."""
    last: dict[int, int] = {}
    violations = []
    for index, event in enumerate(run.events):
        prev = last.get(event.cpu, 0)
        last[event.cpu] = max(prev, event.seq)
        if event.seq == prev + 1:
            continue
        if event.seq <= prev:
            what = "a repeat" if event.seq == prev else "a decrease"
        else:
            what = f"a gap: seq {prev + 1}..{event.seq - 1} missing"
        detail = f"event {index} of the stream is {what} after seq {prev}"
        violations.append(
            Violation("DT-O3", event.cpu, f"seq {prev + 1}", f"seq {event.seq}", detail)
        )
    return violations


def _event_fields(run: DtRun) -> list[Violation]:
    violations = [
        found
        for event in run.events
        for found in (_torn(event), _probe(event))
        if found is not None
    ]
    online = ",".join(map(str, sorted(run.online_cpus)))
    strays = Counter(e.cpu for e in run.events if e.cpu not in run.online_cpus)
    violations += [
        Violation("DT-O3", cpu, f"cpu in {online}", f"cpu {cpu} in {n} events", "not online")
        for cpu, n in sorted(strays.items())
    ]
    return violations


def _torn(event: DtEvent) -> Violation | None:
    want = canary_of(event.seq)
    if event.canary == want:
        return None
    detail = f"torn event: seq {event.seq}'s canary does not match"
    expected, observed = f"canary {want:#010x}", f"canary {event.canary:#010x}"
    return Violation("DT-O3", event.cpu, expected, observed, detail)


def _probe(event: DtEvent) -> Violation | None:
    if event.probe == PROBE_PROFILE:
        return None
    expected, observed = f"probe {PROBE_PROFILE}", f"probe {event.probe}"
    return Violation("DT-O3", event.cpu, expected, observed, f"event seq {event.seq}")


def _exact(
    oracle: str, run: DtRun, law: tuple[str, Mapping[int, int], str], detail: str
) -> list[Violation]:
    """Before the read, per CPU: statistic ``name`` = ``counts[c]`` (0 where absent)."""
    name, counts, what = law
    stats, violations = run.before_read, []
    for cpu in sorted(set(stats.percpu) | set(counts)):
        want = counts.get(cpu, 0)
        laws = [(name, f"{want} ({what})", want, _get(stats, cpu, name))]
        violations += _equal(oracle, cpu, laws, detail)
    return violations


def _sum_law(
    oracle: str, stats: DtOpenStats, cpu: int, law: tuple[str, tuple[str, ...]], detail: str
) -> list[Violation]:
    """``total = part + part …`` on one CPU; observed shows every term."""
    total, parts = law
    want = _get(stats, cpu, total)
    terms = [(name, _get(stats, cpu, name)) for name in parts]
    got = sum(n for _, n in terms)
    if got == want:
        return []
    observed = " + ".join(f"{name} {n}" for name, n in terms) + f" = {got}"
    return [Violation(oracle, cpu, f"{total} = {want}", observed, detail)]


def _equal(oracle: str, cpu: int | None, laws: Iterable[Law], detail: str) -> list[Violation]:
    return [
        Violation(oracle, cpu, f"{name} = {text}", f"{name} = {got}", detail)
        for name, text, want, got in laws
        if got != want
    ]


def _at_most(oracle: str, cpu: int | None, laws: Iterable[Law], detail: str) -> list[Violation]:
    return [
        Violation(oracle, cpu, f"{name} ≤ {text}", f"{name} = {got}", detail)
        for name, text, want, got in laws
        if got > want
    ]


def _snapshots(run: DtRun) -> Snapshots:
    return (("before the read", run.before_read), ("after the read", run.after_read))


def _get(stats: DtOpenStats, cpu: int, name: str) -> int:
    return stats.percpu.get(cpu, {}).get(name, 0)


def _total(stats: DtOpenStats, name: str) -> int:
    return sum(_get(stats, cpu, name) for cpu in stats.percpu)
