"""Plain-text view of one hwpmc run: the per-CPU table and the verdicts.

Pure rendering of an `HwpmcRun`; nothing here judges, prints or writes::

    print(format_hwpmc_table(run))
    print(format_hwpmc_verdicts(check_hwpmc(run), applicable_hwpmc_oracles(run)))

Counters are after every RELEASE, except ``inring``, read after STOP and the idle
phase (HW-O6's quiescence). ``stopped ms`` is the time the CPU's counter stood
stopped on purpose (stalls, and no PMC running there), reported apart from the
periods the emulator did not deliver (``undeliv``, ``deliv%``).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from harness.agent.flavours.hwpmc.oracles import HWPMC_ORACLES
from harness.agent.flavours.hwpmc.results import HwpmcRun
from harness.agent.oracles.report import (
    SeedDefect,
    decimal,
    delivered_percent,
    known_sum,
    nmi_percent,
    verdict_lines,
)
from harness.agent.values.results import Judged, Violation
from harness.agent.values.table import align

TITLES: tuple[str, ...] = (
    *("cpu", "irq", "seen", "recorded", "bufferfull", "stalled_nmi", "swept", "logged"),
    *("discarded", "inring", "restarts", "sweeps", "stopped ms", "nmi%", "undeliv", "deliv%"),
)
_COUNTS = (
    "x_recorded",
    "x_bufferfull",
    "x_stalled_nmi",
    "x_swept",
    "x_logged",
    "x_discarded_stopped",
)


def hwpmc_rows(run: HwpmcRun) -> list[dict[str, object]]:
    """One dict per CPU with the table's numbers (also the matrix cell's rows)."""
    pc, core = run.counters.stats_percpu, run.counters.core
    rows: list[dict[str, object]] = []
    for cpu in sorted(core):
        c, own = core[cpu], pc.get(cpu, {})
        irq = run.kernel.delta(cpu) if run.kernel else None
        rows.append(
            {
                "cpu": cpu,
                "irq": irq,
                "seen": c.get("x_nmi_total", 0),
                **{name[2:]: own.get(name, 0) for name in _COUNTS},
                "inring": run.stopped.get(cpu, {}).get("x_inring", 0),
                "restarts": own.get("x_restarts", 0),
                "sweeps": own.get("x_sweeps", 0),
                "stopped_ms": c.get("x_source_stopped_ns", 0) // 1_000_000,
                "nmi_pct": nmi_percent(c.get("x_nmi_ctx_ok", 0), c.get("x_nmi_total", 0)),
                "undelivered": c.get("x_periods_undelivered", 0),
                "delivered_pct": delivered_percent(
                    c.get("x_nmi_total", 0), c.get("x_periods_undelivered", 0)
                ),
            }
        )
    return rows


def format_hwpmc_table(run: HwpmcRun) -> str:
    """The per-CPU table with an ``all`` row."""
    rows = hwpmc_rows(run)
    keys = (
        "irq",
        "seen",
        "recorded",
        "bufferfull",
        "stalled_nmi",
        "swept",
        "logged",
        "discarded_stopped",
        "inring",
        "restarts",
        "sweeps",
        "stopped_ms",
    )
    cells = [
        [
            str(r["cpu"]),
            *(_cell(r[k]) for k in keys),
            decimal(_num(r["nmi_pct"])),
            str(r["undelivered"]),
            decimal(_num(r["delivered_pct"])),
        ]
        for r in rows
    ]
    total = [known_sum(_int(r[k]) for r in rows) for k in keys]
    cells.append(
        ["all", *(_cell(t) for t in total), "", str(sum(_int0(r["undelivered"]) for r in rows)), ""]
    )
    head = (
        f"hwpmc: nsamples {run.nsamples}, sweep {run.spec.param('sweep_us')} us, "
        f"stall {run.counters.info.get('stall', '?')}, {len(run.log)} log records"
    )
    return "\n".join([head, *align([TITLES, *cells])])


def format_hwpmc_verdicts(
    violations: Sequence[Violation],
    applicable: Collection[str],
    reproduces: SeedDefect | None = None,
    judged: Sequence[Judged] | None = None,
) -> str:
    """One verdict line per oracle; a quirk run's defect shows as ``XFAIL`` (`SeedDefect`)."""
    return verdict_lines(violations, HWPMC_ORACLES, applicable, reproduces, judged)


def _cell(value: object) -> str:
    return "-" if value is None else str(value)


def _int(value: object) -> int | None:
    return value if isinstance(value, int) else None


def _int0(value: object) -> int:
    return value if isinstance(value, int) else 0


def _num(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) else None
