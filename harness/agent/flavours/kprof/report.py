"""Plain-text view of one kprof run: the per-CPU table and the verdicts.

Pure rendering of a `KprofRun`; nothing here judges, prints or writes::

    table = format_kprof_table(run)
    verdicts = format_kprof_verdicts(violations, applicable_kprof_oracles(run))

One row per CPU and an ``all`` row. Counters are the final ones (kpctl closed),
``dropped`` is the true count (``x_hidden_blocks_dropped``, whatever quirk KP-D7
shows), ``nmi%`` and ``deliv%`` come from the core's ``nmi`` file, ``irq`` from
the guest kernel's ``/proc/interrupts``. The queue length is global: it is the
``all`` row's ``qlen``, taken before ``stop`` (no flush yet).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from harness.agent.flavours.kprof import results as res
from harness.agent.flavours.kprof.oracles import KPROF_ORACLES
from harness.agent.flavours.kprof.results import KprofRun
from harness.agent.oracles.report import (
    decimal,
    delivered_percent,
    format_cpus,
    known_sum,
    nmi_percent,
    verdict_lines,
)
from harness.agent.values.results import Judged, Violation
from harness.agent.values.table import align

#: Table columns: (title, per-CPU counter of kprof or None for a computed one).
COLUMNS: tuple[tuple[str, str], ...] = (
    ("committed", "x_records_committed"),
    ("nospare", "x_records_nospare"),
    ("not_tracing", "x_records_not_tracing"),
    ("nested", "x_records_nested_drop"),
    ("full", "x_blocks_full"),
    ("accepted", "x_blocks_accepted"),
    ("dropped", "x_hidden_blocks_dropped"),
    ("rec_in_dropped", "x_records_in_dropped_blocks"),
    ("flushed", "x_blocks_flushed"),
)
TITLES = ("cpu", "irq", "seen", *(title for title, _ in COLUMNS), "qlen", "nmi%", "deliv%")


def _row(run: KprofRun, cpu: int | None) -> tuple[str, ...]:
    final = run.last
    cpus = sorted(final.percpu) if cpu is None else [cpu]
    core = [run.core.get(c, {}) for c in cpus]
    seen = sum(c.get("x_nmi_total", 0) for c in core)
    nmi_ok = sum(c.get("x_nmi_ctx_ok", 0) for c in core)
    undelivered = sum(c.get("x_periods_undelivered", 0) for c in core)
    irq = known_sum(run.kernel.delta(c) if run.kernel else None for c in cpus)
    before = run.reading(res.BEFORE_STOP)
    qlen = "-" if cpu is not None or before is None else str(before.stats.get("qlen", 0))
    return (
        "all" if cpu is None else str(cpu), "-" if irq is None else str(irq), str(seen),
        *(str(sum(final.get(c, name) for c in cpus)) for _, name in COLUMNS),
        qlen, decimal(nmi_percent(nmi_ok, seen)), decimal(delivered_percent(seen, undelivered)),
    )  # fmt: skip


def format_kprof_table(run: KprofRun) -> str:
    """The run's header, its per-CPU table and the stream's line."""
    spec = run.spec
    header = (
        f"kprof: event {spec.event}, period {spec.period}, quirks {spec.quirks:#x}, "
        f"B {spec.param('cpubufsz')}, Q {spec.param('qlimit')}, depth "
        f"{spec.param('trace_depth')}, online CPUs {format_cpus(run.online_cpus)}, "
        f"NMI {'on' if run.nmi_expected else 'off'}"
    )
    cpus = sorted(run.last.percpu)
    table = align([TITLES, *(_row(run, cpu) for cpu in cpus), _row(run, None)])
    stream = (
        f"stream: {run.bytes_read} bytes read, {len(run.trace)} trace records, "
        f"{run.status_records} status records, {run.undecoded} bytes undecoded; "
        f"EOF reads: {' '.join(run.eof) or '-'}"
    )
    return "\n".join([header, *table, stream])


def format_kprof_verdicts(
    violations: Sequence[Violation],
    applicable: Collection[str] | None = None,
    judged: Sequence[Judged] | None = None,
) -> str:
    """One ``PASS``/``FAIL``/``skip`` line per oracle in `KPROF_ORACLES` order."""
    return verdict_lines(violations, KPROF_ORACLES, applicable, judged=judged)
