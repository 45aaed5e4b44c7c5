"""Plain-text view of one dt run: the per-CPU table and the verdicts.

Pure rendering of a `DtRun` and the violations `harness.agent.flavours.dt.oracles` found;
nothing here judges, prints or writes::

    violations = check_dt(run)
    table = format_dt_table(run)
    verdicts = format_dt_verdicts(violations, applicable_dt_oracles(run))

The table has one row per CPU and an ``all`` row. Counters are the open's after the
read, except ``inring``, which is before it (after the read every ring is empty);
``nmi%``, ``undeliv`` and ``deliv%`` come from the core's ``nmi`` file, ``irq`` from the
guest kernel's ``/proc/interrupts``.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from harness.agent.flavours.dt.data import DT
from harness.agent.flavours.dt.oracles import DT_ORACLES
from harness.agent.flavours.dt.results import DtRun
from harness.agent.oracles.report import (
    OverflowShares,
    decimal,
    format_cpus,
    total_row,
    verdict_lines,
)
from harness.agent.values.results import Judged, Violation
from harness.agent.values.table import align

TITLES: tuple[str, ...] = (
    *("cpu", "irq", "seen", "calls", "committed", "read", "dropevt", "recurevt", "skiptick"),
    *("inring", "seq", "nmi%", "undeliv", "deliv%"),
)


@dataclass(frozen=True, slots=True)
class DtRow(OverflowShares):
    """One CPU's numbers as the table shows them; ``cpu`` None is the ``all`` row.

    ``seq`` is the last sequence number committed on the CPU (None in the ``all``
    row: sequences are per CPU); ``seen`` and ``nmi_ok`` are the core's overflows
    and those handled in NMI; ``irq`` the guest kernel's own count of PMU
    interrupts (None: not read); ``undelivered`` the periods the emulator never
    raised as an overflow in time (reported with the delivered share, never
    accounted).
    """

    cpu: int | None
    calls: int
    committed: int
    read: int
    dropevt: int
    recurevt: int
    skiptick: int
    inring: int
    seq: int | None
    seen: int
    nmi_ok: int
    irq: int | None
    undelivered: int


def dt_rows(run: DtRun) -> tuple[DtRow, ...]:
    """One row per CPU that any reading or the core knows, sorted by CPU."""
    before, after = run.before_read.percpu, run.after_read.percpu
    rows = []
    for cpu in sorted(set(before) | set(after) | set(run.core)):
        stats, core = after.get(cpu, {}), run.core.get(cpu, {})
        rows.append(
            DtRow(
                cpu=cpu,
                calls=stats.get("x_calls", 0),
                committed=stats.get("x_committed", 0),
                read=stats.get("dc_readevt", 0),
                dropevt=stats.get("dc_dropevt", 0),
                recurevt=stats.get("dc_recurevt", 0),
                skiptick=stats.get("dc_skiptick", 0),
                inring=before.get(cpu, {}).get("x_inring", 0),
                seq=stats.get("x_seq", 0),
                seen=core.get("x_nmi_total", 0),
                nmi_ok=core.get("x_nmi_ctx_ok", 0),
                irq=run.kernel.delta(cpu) if run.kernel else None,
                undelivered=core.get("x_periods_undelivered", 0),
            )
        )
    return tuple(rows)


def dt_total_row(rows: Iterable[DtRow]) -> DtRow:
    """The ``all`` row: sums of ``rows``, no seq (sequences are per CPU)."""
    return total_row(DtRow, rows, seq=None)


def dt_nmi_mode(run: DtRun) -> str:
    """The NMI mode the guest was booted with, in words."""
    if run.nmi_expected:
        return "NMI on (PMU overflows as NMIs)"
    return "NMI off (pseudo-NMI off, or a software clock: overflows are normal IRQs)"


def format_dt_table(run: DtRun) -> str:
    """The run's header, its per-CPU table and the open's GSTATS line."""
    spec = run.spec
    header = (
        f"{spec.flavour}: event {spec.event}, period {spec.period}, quirks {spec.quirks:#x}, "
        f"read size {run.read_size}, online CPUs {format_cpus(run.online_cpus)}, "
        f"{dt_nmi_mode(run)}"
    )
    rows = dt_rows(run)
    cells = [_cells(row) for row in (*rows, dt_total_row(rows))]
    return "\n".join([header, *align([TITLES, *cells]), gstats_line(run)])


def gstats_line(run: DtRun) -> str:
    """DTIOCGSTATS after the read as the module returned it, and the open's counters."""
    stats = run.after_read
    gstats = _pairs(stats.gstats, DT.stat_names)
    opens = _pairs(stats.open, ("x_wakeups", "x_partial_events"))
    return f"GSTATS after the read: {gstats}; open: {opens}"


def format_dt_verdicts(
    violations: Sequence[Violation],
    applicable: Collection[str] | None = None,
    judged: Sequence[Judged] | None = None,
) -> str:
    """One ``PASS``/``FAIL``/``skip`` line per oracle in `DT_ORACLES` order, violations below."""
    return verdict_lines(violations, DT_ORACLES, applicable, judged=judged)


def _pairs(values: Mapping[str, int], names: Iterable[str]) -> str:
    return ", ".join(f"{name} {values.get(name, 0)}" for name in names)


def _cells(row: DtRow) -> tuple[str, ...]:
    return (
        "all" if row.cpu is None else str(row.cpu),
        "-" if row.irq is None else str(row.irq),
        *map(str, (row.seen, row.calls, row.committed, row.read, row.dropevt, row.recurevt)),
        *map(str, (row.skiptick, row.inring)),
        "-" if row.seq is None else str(row.seq),
        decimal(row.nmi_pct),
        str(row.undelivered),
        decimal(row.delivered_pct),
    )
