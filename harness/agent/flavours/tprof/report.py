"""Plain-text and JSON views of one tprof sampling run: the per-CPU table and the verdicts.

Pure rendering of a `TprofRun` and the violations its oracles found (the shared
parts are in `harness.agent.oracles.report`);
nothing here judges, prints or writes::

    violations = check_tprof(run)
    table = format_cpu_table(run)
    verdicts = format_verdicts(violations, applicable_oracles(run))
    record["agent"] = summary(run, violations)

The table has one row per CPU and an ``all`` row; drop-cause columns appear only when
some CPU has a non-zero count (``overflow`` and ``dropbuf_sample`` always). ``irq``
is the guest kernel's own count of PMU interrupts (oracle IRQ compares it with
``seen``); ``undeliv`` counts periods the emulator never raised as an overflow in
time and ``deliv%`` is the share that did arrive: reported, never accounted.
``perf`` is Linux perf's samples on the CPU where it ran beside the agent (oracle
PEER). ``throttled`` counts overflows after which the perf core throttled the event.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from harness.agent.flavours.tprof.data import TPROF_DROP_CAUSES, samples_per_buffer
from harness.agent.flavours.tprof.oracles import TPROF_ORACLES
from harness.agent.flavours.tprof.results import TprofRun
from harness.agent.oracles.report import (
    OverflowShares,
    decimal,
    failed_oracles,
    format_cpus,
    verdict_lines,
)
from harness.agent.oracles.report import total_row as all_row
from harness.agent.values.results import Judged, Violation
from harness.agent.values.table import align

#: Drop-cause columns shown even when every CPU has 0.
ALWAYS_SHOWN: tuple[str, ...] = ("overflow", "dropbuf_sample")
#: (per-CPU statistic, column name) of each drop cause.
_CAUSES: tuple[tuple[str, str], ...] = tuple(
    (name, name.removeprefix("x_")) for name, _ in TPROF_DROP_CAUSES
)


@dataclass(frozen=True, slots=True)
class CpuRow(OverflowShares):
    """One CPU's numbers as the table shows them; ``cpu`` None is the ``all`` row.

    ``irq`` is the guest kernel's count of PMU interrupts over the run (None: not
    read, or the CPU was offline at a read). ``drops`` holds every drop cause,
    named without its ``x_`` prefix, in `TPROF_DROP_CAUSES` order; ``undelivered``
    is ``x_periods_undelivered`` (periods the emulator never raised as an
    overflow in time), reported with the delivered share, never accounted;
    ``throttled`` is ``x_throttled`` (overflows after which the perf core
    throttled the event).
    """

    cpu: int | None
    seen: int
    irq: int | None
    peer: int | None  # Linux perf's samples on this CPU in the agent's window (None: no peer)
    calls: int
    recorded: int
    drops: tuple[tuple[str, int], ...]
    undelivered: int
    throttled: int
    nmi_ok: int
    irqoff: int
    probe_hits: int
    probe_runs: int
    handler_sum_ns: int
    handler_max_ns: int

    @property
    def mean_us(self) -> float | None:
        """Mean handler time in µs (1 decimal); None without overflows."""
        return round(self.handler_sum_ns / self.seen / 1000, 1) if self.seen else None

    @property
    def max_us(self) -> float:
        """Longest handler run in µs (1 decimal)."""
        return round(self.handler_max_ns / 1000, 1)

    def as_dict(self) -> dict[str, object]:
        """The row as JSON-serialisable values, derived numbers included."""
        return {
            "cpu": "all" if self.cpu is None else self.cpu,
            "seen": self.seen,
            "irq": self.irq,
            "perf": self.peer,
            "calls": self.calls,
            "recorded": self.recorded,
            "drops": dict(self.drops),
            "undelivered": self.undelivered,
            "delivered_pct": self.delivered_pct,
            "throttled": self.throttled,
            "nmi_pct": self.nmi_pct,
            "irqoff": self.irqoff,
            "probe_hits": self.probe_hits,
            "probe_runs": self.probe_runs,
            "mean_us": self.mean_us,
            "max_us": self.max_us,
        }


def cpu_rows(run: TprofRun) -> tuple[CpuRow, ...]:
    """One row per CPU that has core or per-CPU statistics, sorted by CPU."""
    rows = []
    for cpu in sorted(set(run.counters.core) | set(run.counters.stats_percpu)):
        core = run.counters.core.get(cpu, {})
        stats = run.counters.stats_percpu.get(cpu, {})
        rows.append(
            CpuRow(
                cpu=cpu,
                seen=core.get("x_nmi_total", 0),
                irq=run.kernel.delta(cpu) if run.kernel else None,
                peer=run.peer.counts.cpu(cpu).samples
                if run.peer and cpu in run.peer.counts.watched
                else None,
                calls=core.get("x_producer_calls", 0),
                recorded=stats.get("x_sample", 0),
                drops=tuple((column, stats.get(name, 0)) for name, column in _CAUSES),
                undelivered=core.get("x_periods_undelivered", 0),
                throttled=core.get("x_throttled", 0),
                nmi_ok=core.get("x_nmi_ctx_ok", 0),
                irqoff=core.get("x_irqoff_samples", 0),
                probe_hits=core.get("x_probe_hits", 0),
                probe_runs=core.get("x_probe_runs", 0),
                handler_sum_ns=core.get("x_nmi_sum_ns", 0),
                handler_max_ns=core.get("x_nmi_max_ns", 0),
            )
        )
    return tuple(rows)


def total_row(rows: Iterable[CpuRow]) -> CpuRow:
    """The ``all`` row: sums of ``rows``, the largest handler maximum."""
    rows = tuple(rows)
    drops = tuple(
        (column, sum(dict(r.drops).get(column, 0) for r in rows)) for _, column in _CAUSES
    )
    return all_row(CpuRow, rows, drops=drops,
                   handler_max_ns=max((r.handler_max_ns for r in rows), default=0))  # fmt: skip


def drop_columns(rows: Iterable[CpuRow]) -> tuple[str, ...]:
    """Drop causes (without ``x_``) worth a column: non-zero somewhere, or `ALWAYS_SHOWN`."""
    nonzero = {name for row in rows for name, n in row.drops if n}
    return tuple(column for _, column in _CAUSES if column in nonzero or column in ALWAYS_SHOWN)


def nmi_mode(run: TprofRun) -> str:
    """The NMI mode the run was in, in words, with the producer calls that ran in NMI."""
    nmi = sum(c.get("x_producer_calls_nmi", 0) for c in run.counters.core.values())
    calls = sum(c.get("x_producer_calls", 0) for c in run.counters.core.values())
    if not run.nmi_expected:
        mode = "NMI off (pseudo-NMI off, or a software clock): overflows are normal IRQs"
        return f"{mode}; {nmi} of {calls} producer calls in NMI"
    return f"NMI on (PMU overflows as NMIs): {nmi} of {calls} producer calls in NMI"


def format_cpu_table(run: TprofRun) -> str:
    """The run's header (spec, drain, quirks, CPUs, NMI mode) and its per-CPU table."""
    spec = run.spec
    if spec.drain == "manual":
        drain = "manual" if run.kicks is None else f"manual ({run.kicks} kicks)"
    else:
        drain = f"auto every {spec.drain_ms} ms"
    s = samples_per_buffer(spec.param("est_freq"), spec.param("buffer_samples"))
    header = (
        f"{spec.flavour}: event {spec.event}, period {spec.period}, "
        f"S {s}, drain {drain}, quirks {spec.quirks:#x}, "
        f"online CPUs {format_cpus(run.online_cpus)}"
    )
    rows = cpu_rows(run)
    shown = drop_columns(rows)
    titles = ("cpu", "irq", "seen", "perf", "calls", "recorded", *shown)
    titles += ("undeliv", "deliv%", "throttled", "nmi%", "irqoff", "probe", "mean_us", "max_us")
    cells = [_cells(row, shown) for row in (*rows, total_row(rows))]
    return "\n".join([header, nmi_mode(run), *align([titles, *cells])])


def format_verdicts(
    violations: Sequence[Violation],
    applicable: Collection[str] | None = None,
    judged: Sequence[Judged] | None = None,
) -> str:
    """One verdict line per tprof oracle (`harness.agent.oracles.report.verdict_lines`)."""
    return verdict_lines(violations, TPROF_ORACLES, applicable, judged=judged)


def summary(run: TprofRun, violations: Sequence[Violation]) -> dict[str, object]:
    """The table's numbers and the verdict as JSON-serialisable values, for run records."""
    rows = cpu_rows(run)
    return {
        "flavour": run.spec.flavour,
        "nmi_mode": nmi_mode(run),
        "nmi_expected": run.nmi_expected,
        "online_cpus": list(run.online_cpus),
        "cpus": [row.as_dict() for row in rows],
        "totals": total_row(rows).as_dict(),
        "failed": sorted(failed_oracles(violations)),
        "violations": [str(v) for v in violations],
    }


def _cells(row: CpuRow, shown: Sequence[str]) -> tuple[str, ...]:
    drops: Mapping[str, int] = dict(row.drops)
    return (
        "all" if row.cpu is None else str(row.cpu),
        "-" if row.irq is None else str(row.irq),
        str(row.seen),
        "-" if row.peer is None else str(row.peer),
        str(row.calls),
        str(row.recorded),
        *(str(drops[name]) for name in shown),
        str(row.undelivered),
        decimal(row.delivered_pct),
        str(row.throttled),
        decimal(row.nmi_pct),
        str(row.irqoff),
        f"{row.probe_hits}/{row.probe_runs}",
        decimal(row.mean_us),
        decimal(row.max_us),
    )


def throttle_lost(run: TprofRun) -> dict[int, int]:
    """Per CPU, periods the sampling counter missed against its enabled time (≥ 0).

    A throttled event stays enabled but stops counting, so its enabled time says
    how many events were due: ``(x_enabled_ns × events per ns - x_counter_value)
    // period``. A report figure for the throttling case (the perf core's own
    mark, ``x_throttled``, is what oracle THROTTLE judges); {} when the event's
    rate is not fixed.
    """
    rate = run.ref_events_per_ns
    if rate is None:
        return {}
    lost = {}
    for cpu, core in sorted(run.counters.core.items()):
        if core.get("x_events_created", 0) <= 0:
            lost[cpu] = 0  # never sampled here
            continue
        due = int(core.get("x_enabled_ns", 0) * rate)
        lost[cpu] = max(0, (due - core.get("x_counter_value", 0)) // run.spec.period)
    return lost
