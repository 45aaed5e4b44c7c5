"""What each flavour of the agent is, as data: statistics, quirk bits, records.

The C templates loop over these tuples to declare counters and print them, and
the parsers and oracles use the same names, so a counter cannot be added on one
side only::

    info = get("tprof")
    info.stats            # names in the order of the `stats` file
    info.quirk_bit("TP-D1")
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.agent.layouts import DT_EVT, TPROF_SAMPLE, RecordLayout
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
    ("x_pmu_merged", "periods with no overflow of their own: handled late, or pending at stop"),
    ("x_pmu_merged_at_stop", "of those, the periods still pending when the event stopped"),
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
class FlavourInfo:
    """One flavour: its counters, quirks and sample record."""

    name: str
    flavour_id: int
    stats: tuple[tuple[str, str], ...]  # (name, meaning), global, order of `stats`
    stats_percpu: tuple[tuple[str, str], ...]  # (name, meaning), per CPU
    quirks: tuple[Quirk, ...]
    record: RecordLayout

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

    def quirk_bit(self, defect: str) -> int:
        """The mask bit (as a value) that reproduces ``defect`` (e.g. ``"TP-D1"``)."""
        for quirk in self.quirks:
            if quirk.defect == defect:
                return 1 << quirk.bit
        known = ", ".join(q.defect for q in self.quirks)
        raise ConfigError(f"flavour {self.name} has no quirk {defect!r}; known: {known}")


# Drop causes, per CPU: every producer call ends in exactly one of these or in
# `x_sample` (recorded in a buffer that reached the read list) or in the current
# buffer (`x_cur_used`, `x_cur_overflow`) while running.
TPROF_DROP_CAUSES: tuple[tuple[str, str], ...] = (
    ("x_overflow", "buffer full: the seed's per-buffer overflow, of queued buffers"),
    ("x_dropbuf_sample", "recorded, then the whole buffer dropped: list full"),
    ("x_overflow_dropbuf", "buffer full, in a buffer later dropped (seed: lost, TP-D1)"),
    ("x_overflow_emptybuf", "buffer full with S = 0 or nothing recorded (seed: lost)"),
    ("x_nobuf", "no buffer installed on this CPU"),
    ("x_not_running", "arrived while tprof was not running"),
    ("x_nested_drop", "a second producer context on the same CPU"),
    ("x_stop_discard", "left in a current buffer freed at STOP"),
    ("x_quirk_lost", "lost on purpose by quirk TP-D1 (the seed's invisible loss)"),
)

TPROF = FlavourInfo(
    name="tprof",
    flavour_id=1,
    stats=(
        ("sample", "samples in buffers appended to the read list"),
        ("overflow", "overflow of buffers appended to the read list"),
        ("buf", "buffers appended to the read list"),
        ("emptybuf", "swaps that returned a buffer with nothing recorded"),
        ("dropbuf", "non-empty buffers dropped because the list was full"),
        ("dropbuf_sample", "samples in those dropped buffers"),
        ("x_overflow_dropbuf", "overflow of dropped buffers (the seed loses it: TP-D1)"),
        ("x_overflow_emptybuf", "overflow of empty buffers (the seed loses it: TP-D1/D2)"),
        ("x_nobuf", "producer calls with no buffer installed"),
        ("x_not_running", "producer calls while not running"),
        ("x_nested_drop", "producer calls nested in another on the same CPU"),
        ("x_stop_discard", "samples left in current buffers freed at STOP"),
        ("x_quirk_lost", "overflow lost by quirk TP-D1, as the seed loses it"),
        ("x_swaps", "buffer swaps, all CPUs"),
        ("x_nbuf_on_list", "buffers on the read list now"),
        ("x_nbuf_on_list_max", "most buffers ever on the read list"),
        ("x_bytes_read", "bytes returned by read(2)"),
    ),
    stats_percpu=(
        ("x_sample", "samples of this CPU in buffers appended to the read list"),
        *TPROF_DROP_CAUSES,
        ("x_swaps", "swaps of this CPU's buffer"),
        ("x_swap_misplaced", "drain work that ran on another CPU and did nothing"),
        ("x_cur_used", "samples in the current buffer"),
        ("x_cur_overflow", "overflow of the current buffer"),
    ),
    quirks=(
        Quirk(0, "TP-D1", "overflow of dropped and empty buffers is lost, counted nowhere"),
        Quirk(1, "TP-D2", "S = min(2 est_freq, 10000) even when that is 0; START accepts it"),
        Quirk(2, "TP-D3", "a START that fails after taking the backend leaks it: EBUSY after"),
        Quirk(3, "TP-D9", "a partially read buffer goes back on the list past its limit"),
    ),
    record=TPROF_SAMPLE,
)

DT = FlavourInfo(
    name="dt",
    flavour_id=2,
    stats=(
        ("readevt", "events read (DTIOCGSTATS)"),
        ("dropevt", "events dropped because the CPU's ring was full"),
        ("skiptick", "profile ticks skipped (seed, quirk DT-D1: the last CPU's only)"),
        ("recurevt", "events dropped for recursion (seed, quirk DT-D1: the last CPU's only)"),
    ),
    stats_percpu=(
        ("dc_readevt", "events the reader copied from this CPU's ring"),
        ("dc_dropevt", "get calls that found this CPU's ring full"),
        ("dc_skiptick", "profile ticks skipped on this CPU"),
        ("dc_recurevt", "get calls while this CPU was already inside one"),
        ("x_committed", "events committed into this CPU's ring"),
        ("x_calls", "get calls on this CPU (E_c)"),
        ("x_inring", "events in the ring now: (cons - prod) mod 16"),
        ("x_seq", "sequence number of the last committed event"),
    ),
    quirks=(
        Quirk(16, "DT-D1", "GSTATS skiptick and recurevt are the last CPU's, not the sum"),
        Quirk(17, "DT-D2", "read budget rounds up: a partial event, consumed and counted"),
    ),
    record=DT_EVT,
)

#: Per-open counters of dt, after the per-CPU ones in DTIOC_X_PCPUSTATS.
DT_OPEN_STATS: tuple[tuple[str, str], ...] = (
    ("x_evtcnt", "events readable now, all CPUs (the seed's ds_evtcnt)"),
    ("x_wakeups", "reader wakeups run from the irq_work"),
    ("x_partial_events", "events returned truncated (quirk DT-D2)"),
)
DT_RING_SLOTS = 16

FLAVOURS: dict[str, FlavourInfo] = {"tprof": TPROF, "dt": DT}


def get(name: str) -> FlavourInfo:
    """The flavour called ``name``.

    :raise ConfigError: no such flavour; the message lists the known ones.
    """
    try:
        return FLAVOURS[name]
    except KeyError:
        known = ", ".join(sorted(FLAVOURS))
        raise ConfigError(f"unknown agent flavour {name!r}; known: {known}") from None
