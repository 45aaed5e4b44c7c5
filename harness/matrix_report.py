"""Matrix run reports: ``summary.json`` and one static ``report.html``.

A matrix run executes one pytest cell per combination of axes. Each cell
leaves a summary, a JSON-able dict::

    {"cell": "arm64-2s2cl1c2t-tprof-nmi_on-tcg-default",
     "axes": {"arch": "arm64", "topology": "2s2cl1c2t", "flavour": "tprof",
              "nmi": "on", "accel": "tcg", "variant": "default"},
     "outcome": "passed",            # or "failed", "skipped", "error"
     "reason": "",                   # skip reason or first failure line
     "duration_s": 12.3,
     "nodeid": "tests/matrix/test_matrix.py::test_cell[...]",
     "cpus": [{"cpu": 0, "overflows": 1771, "recorded": 1771, "merged": 31,
               "drops": {"overflow": 0, "dropbuf_sample": 0},   # cause -> count
               "nmi_share": 1.0}],   # share of overflows taken in NMI; null: none
     "violations": ["COUNT on CPU 1: expected ..., observed ..."]}

``axes`` may hold any names (``topology`` groups the plots), ``drops`` any
causes. A missing or mistyped field renders as empty or zero rather than
failing: the report of a broken run is the one most wanted. ``summary.json``
wraps the cells as ``{"matrix", "started_at", "wall_s", "workers",
"totals": {outcome: count}, "cells": [...]}``::

    path = write_summary(cells, run_dir, matrix="smoke", started_at=stamp,
                         wall_s=812.4, workers=2)
    write_html(json.loads(path.read_text()), run_dir)   # run_dir/report.html

The page is self-contained (inline CSS, hand-built SVG, no scripts, no
network): totals, a table of cells with the command that reruns each alone,
per topology three plots (samples recorded per CPU, drops per cause, NMI
share), then each cell's per-CPU table and violations. All text is escaped.
"""

from __future__ import annotations

import html
import json
import math
import re
import shlex
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

OUTCOMES = ("passed", "failed", "error", "skipped")
# outcome -> (badge and label colour, table row tint); unknown outcomes look like "error".
_OUTCOME_STYLE = {
    "passed": ("#2e7d32", "#fff"),
    "failed": ("#c62828", "#fdecea"),
    "error": ("#6a1b9a", "#f3e5f5"),
    "skipped": ("#757575", "#f2f2f2"),
}
_PALETTE = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
)  # fmt: skip
_NMI_COLOURS = {"on": "#1f77b4", "off": "#ff7f0e"}
_CSS = (
    "body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}"
    "table{border-collapse:collapse;margin:.5em 0}th{background:#f0f0f0}"
    "th,td{border:1px solid #ccc;padding:2px 6px;text-align:left;vertical-align:top}"
    "td.num{text-align:right;font-variant-numeric:tabular-nums}"
    ".badge{display:inline-block;padding:0 6px;border-radius:3px;color:#fff;font-weight:600}"
    ".plots{display:flex;flex-wrap:wrap;gap:1.5em;align-items:flex-start}"
    "figure{margin:0}figcaption{font-weight:600}.reason{font-weight:600}"
    "svg text{font-size:11px;fill:#222}.axis{stroke:#333}.grid{stroke:#ddd}"
    "section.cell{border-left:4px solid #ccc;padding-left:.8em;margin:1.2em 0}"
) + "".join(
    f".badge.o-{o}{{background:{c}}}section.o-{o}{{border-color:{c}}}"
    f"svg text.o-{o}{{fill:{c}}}tr.o-{o}{{background:{tint}}}"
    for o, (c, tint) in _OUTCOME_STYLE.items()
)
_LEFT, _PLOT_W, _ROW_H = 200.0, 260.0, 22.0  # horizontal plots: label column, bars, row
_BAR_W, _GAP, _PLOT_H = 12.0, 18.0, 150.0  # grouped vertical bars: bar, between groups, axis


@dataclass(frozen=True, slots=True)
class _Cpu:
    cpu: int
    overflows: int
    recorded: int
    merged: int
    drops: tuple[tuple[str, int], ...]
    nmi_share: float | None


@dataclass(frozen=True, slots=True)
class _Cell:
    cell: str
    axes: tuple[tuple[str, str], ...]
    outcome: str
    reason: str
    duration_s: float
    nodeid: str
    cpus: tuple[_Cpu, ...]
    violations: tuple[str, ...]

    def axis(self, name: str) -> str:
        return dict(self.axes).get(name, "")

    def drop_totals(self) -> dict[str, int]:
        totals: dict[str, int] = {}
        for cause, count in (drop for cpu in self.cpus for drop in cpu.drops):
            totals[cause] = totals.get(cause, 0) + max(count, 0)
        return totals

    def nmi_share(self) -> float | None:
        """Overflow-weighted NMI share over the CPUs that had one; None if none had."""
        known = [
            (cpu.nmi_share, max(cpu.overflows, 0)) for cpu in self.cpus if cpu.nmi_share is not None
        ]
        if not known:
            return None
        weight = sum(overflows for _, overflows in known)
        if weight == 0:  # shares without overflow counts: plain mean
            return sum(share for share, _ in known) / len(known)
        return sum(share * overflows for share, overflows in known) / weight


def count_outcomes(outcomes: Iterable[str]) -> dict[str, int]:
    """Cells per outcome: every known outcome (possibly 0), then any others seen."""
    totals = dict.fromkeys(OUTCOMES, 0)
    for outcome in outcomes:
        totals[outcome] = totals.get(outcome, 0) + 1
    return totals


def write_summary(
    cells: Sequence[Mapping[str, object]],
    out: Path,
    *,
    matrix: str,
    started_at: str,
    wall_s: float,
    workers: int,
) -> Path:
    """Write ``out/summary.json`` (creating ``out``), cells in their order; return its path.

    :raise TypeError: a cell holds something JSON cannot represent.
    """
    summary = {
        "matrix": matrix,
        "started_at": started_at,
        "wall_s": wall_s,
        "workers": workers,
        "totals": count_outcomes(str(cell.get("outcome", "error")) for cell in cells),
        "cells": [dict(cell) for cell in cells],
    }
    return _write_text(out / "summary.json", json.dumps(summary, indent=2) + "\n")


def write_html(summary: Mapping[str, object], out: Path) -> Path:
    """Write ``out/report.html`` (creating ``out``) and return its path."""
    return _write_text(out / "report.html", render_html(summary))


def rerun_command(matrix: str, cell: str) -> str:
    """The shell command that reruns one cell of ``matrix`` alone."""
    return shlex.join(["invoke", "test", "--matrix", matrix, "-k", cell])


def render_html(summary: Mapping[str, object]) -> str:
    """The whole report page for a ``summary.json`` document."""
    matrix = str(summary.get("matrix", ""))
    cells = tuple(_parse_cell(_mapping(raw)) for raw in _sequence(summary.get("cells")))
    causes = sorted({cause for cell in cells for cpu in cell.cpus for cause, _ in cpu.drops})
    head = '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
    body = [
        f"{head}<title>Matrix {_esc(matrix)}</title><style>{_CSS}</style></head><body>",
        _header(summary, cells),
        _summary_table(matrix, cells),
        *(_plots(topology, group, causes) for topology, group in _by_topology(cells).items()),
        "<h2>Cell details</h2>",
        *(_details(matrix, cell) for cell in cells),
        "</body></html>\n",
    ]
    return "\n".join(body)


# -- parsing: raw JSON to typed values, tolerant of missing fields ------------


def _int(raw: object) -> int:
    value = _float(raw)
    return 0 if value is None else int(value)


def _float(raw: object) -> float | None:
    if isinstance(raw, int | float) and not isinstance(raw, bool) and math.isfinite(raw):
        return float(raw)
    return None


def _mapping(raw: object) -> Mapping[str, object]:
    return raw if isinstance(raw, Mapping) else {}


def _sequence(raw: object) -> Sequence[object]:
    return raw if isinstance(raw, list | tuple) else ()


def _parse_cpu(raw: Mapping[str, object]) -> _Cpu:
    share = _float(raw.get("nmi_share"))
    return _Cpu(
        cpu=_int(raw.get("cpu")),
        overflows=_int(raw.get("overflows")),
        recorded=_int(raw.get("recorded")),
        merged=_int(raw.get("merged")),
        drops=tuple((str(k), _int(v)) for k, v in _mapping(raw.get("drops")).items()),
        nmi_share=None if share is None else min(max(share, 0.0), 1.0),
    )


def _parse_cell(raw: Mapping[str, object]) -> _Cell:
    return _Cell(
        cell=str(raw.get("cell", "")),
        axes=tuple((str(k), str(v)) for k, v in _mapping(raw.get("axes")).items()),
        outcome=str(raw.get("outcome", "error")),
        reason=str(raw.get("reason") or ""),
        duration_s=_float(raw.get("duration_s")) or 0.0,
        nodeid=str(raw.get("nodeid") or ""),
        cpus=tuple(_parse_cpu(_mapping(cpu)) for cpu in _sequence(raw.get("cpus"))),
        violations=tuple(str(v) for v in _sequence(raw.get("violations"))),
    )


def _by_topology(cells: Sequence[_Cell]) -> dict[str, list[_Cell]]:
    groups: dict[str, list[_Cell]] = {}
    for cell in cells:
        groups.setdefault(cell.axis("topology") or "(no topology)", []).append(cell)
    return groups


def _short_labels(cells: Sequence[_Cell]) -> dict[str, str]:
    """Plot labels: cell ids without the ``-`` parts all share, clipped, marked unless passed."""
    split = [cell.cell.split("-") for cell in cells]
    labels = {cell.cell: cell.cell for cell in cells}
    if len(cells) > 1 and len({len(parts) for parts in split}) == 1:
        varying = [i for i in range(len(split[0])) if len({parts[i] for parts in split}) > 1]
        short = {c.cell: "-".join(p[i] for i in varying) for c, p in zip(cells, split, strict=True)}
        labels = short if len(set(short.values())) == len(cells) else labels
    for cell in cells:
        label = labels[cell.cell] if len(labels[cell.cell]) <= 30 else labels[cell.cell][:29] + "…"
        labels[cell.cell] = label + ("" if cell.outcome == "passed" else f" ({cell.outcome})")
    return labels


# -- HTML ---------------------------------------------------------------------


def _esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def _outcome_class(outcome: str) -> str:
    return "o-" + (outcome if outcome in _OUTCOME_STYLE else "error")


def _badge(outcome: str, text: str = "") -> str:
    return f'<span class="badge {_outcome_class(outcome)}">{_esc(text or outcome)}</span>'


def _anchor(cell: _Cell) -> str:
    return _esc("cell-" + re.sub(r"\s", "_", cell.cell))


def _header(summary: Mapping[str, object], cells: Sequence[_Cell]) -> str:
    totals = count_outcomes(cell.outcome for cell in cells)
    badges = " ".join(_badge(outcome, f"{n} {outcome}") for outcome, n in totals.items())
    facts = (
        f"started {_esc(summary.get('started_at', '?'))} · "
        f"wall {_float(summary.get('wall_s')) or 0.0:.1f} s · "
        f"{_int(summary.get('workers'))} workers · {len(cells)} cells"
    )
    matrix = _esc(summary.get("matrix", ""))
    return f"<header><h1>Matrix {matrix}</h1><p>{facts}</p><p>{badges}</p></header>"


def _summary_table(matrix: str, cells: Sequence[_Cell]) -> str:
    axis_names = list(dict.fromkeys(name for cell in cells for name, _ in cell.axes))
    columns = ["cell", "outcome", *axis_names, "duration", "reason", "rerun alone"]
    rows = [_summary_row(matrix, cell, axis_names) for cell in cells]
    rows = rows or [f'<tr><td colspan="{len(columns)}">no cells</td></tr>']
    head = "".join(f"<th>{_esc(name)}</th>" for name in columns)
    return f"<h2>Cells</h2><table><tr>{head}</tr>{''.join(rows)}</table>"


def _summary_row(matrix: str, cell: _Cell, axis_names: Sequence[str]) -> str:
    axes = dict(cell.axes)
    cells = [
        f'<td><a href="#{_anchor(cell)}">{_esc(cell.cell)}</a></td>',
        f"<td>{_badge(cell.outcome)}</td>",
        *(f"<td>{_esc(axes.get(name, ''))}</td>" for name in axis_names),
        f'<td class="num">{cell.duration_s:.1f} s</td>',
        f"<td>{_esc(cell.reason)}</td>",
        f"<td><code>{_esc(rerun_command(matrix, cell.cell))}</code></td>",
    ]
    return f'<tr class="{_outcome_class(cell.outcome)}">{"".join(cells)}</tr>'


def _details(matrix: str, cell: _Cell) -> str:
    causes = list(dict.fromkeys(cause for cpu in cell.cpus for cause, _ in cpu.drops))
    columns = ["cpu", "overflows", "recorded", "merged", *(f"drops: {c}" for c in causes)]
    head = "".join(f"<th>{_esc(name)}</th>" for name in [*columns, "nmi share"])
    rows = "".join(_cpu_row(cpu, causes) for cpu in cell.cpus)
    table = f"<table><tr>{head}</tr>{rows}</table>" if cell.cpus else "<p>no per-CPU data</p>"
    items = "".join(f"<li><code>{_esc(v)}</code></li>" for v in cell.violations)
    violations = f"<ul>{items}</ul>" if items else "<p>no violations</p>"
    reason = f'<p class="reason">{_esc(cell.outcome)}: {_esc(cell.reason)}</p>'
    axes = ", ".join(f"{name}={value}" for name, value in cell.axes)
    return (
        f'<section class="cell {_outcome_class(cell.outcome)}" id="{_anchor(cell)}">'
        f"<h3>{_badge(cell.outcome)} {_esc(cell.cell)}</h3>{reason if cell.reason else ''}"
        f"<p>{_esc(axes)} · {cell.duration_s:.1f} s · <code>{_esc(cell.nodeid)}</code></p>"
        f"<p>rerun: <code>{_esc(rerun_command(matrix, cell.cell))}</code></p>"
        f"{table}<h4>Violations</h4>{violations}</section>"
    )


def _cpu_row(cpu: _Cpu, causes: Sequence[str]) -> str:
    drops = dict(cpu.drops)
    values = [cpu.cpu, cpu.overflows, cpu.recorded, cpu.merged, *(drops.get(c, 0) for c in causes)]
    share = "–" if cpu.nmi_share is None else f"{100 * cpu.nmi_share:.1f} %"
    return "<tr>" + "".join(f'<td class="num">{v}</td>' for v in [*values, share]) + "</tr>"


# -- SVG plots ----------------------------------------------------------------

_Scale = Callable[[float], float]
_Row = Callable[[_Cell, float, _Scale], list[str]]


@dataclass(frozen=True, slots=True)
class _HPlot:
    """A horizontal bar plot: one row per cell, x from 0 to ``ticks[-1]``."""

    kind: str
    x_label: str
    ticks: tuple[float, ...]
    legend: tuple[tuple[str, str], ...]


def _plots(topology: str, cells: Sequence[_Cell], causes: Sequence[str]) -> str:
    figures = [
        ("Samples recorded per CPU", _recorded_svg(topology, cells)),
        ("Drops per cause (sum over CPUs)", _drops_svg(topology, cells, causes)),
        ("NMI share of overflows", _nmi_svg(topology, cells)),
    ]
    inner = "".join(f"<figure><figcaption>{t}</figcaption>{svg}</figure>" for t, svg in figures)
    return f'<h2>Topology {_esc(topology)}</h2><div class="plots">{inner}</div>'


def _el(tag: str, content: str = "", **attrs: object) -> str:
    """An SVG element: attributes escaped, floats to 0.1, ``text_anchor`` → ``text-anchor``."""
    pairs = ((k.rstrip("_").replace("_", "-"), v) for k, v in attrs.items())
    text = "".join(f' {k}="{_esc(f"{v:.1f}" if isinstance(v, float) else v)}"' for k, v in pairs)
    return f"<{tag}{text}>{content}</{tag}>"


def _svg(kind: str, topology: str, size: tuple[float, float], parts: Sequence[str]) -> str:
    width, height = size
    box = f"0 0 {width:.0f} {height:.0f}"
    attrs = {"class": "plot", "data-plot": kind, "data-topology": topology, "viewBox": box}
    svg_ns = "http://www.w3.org/2000/svg"
    return _el("svg", "".join(parts), xmlns=svg_ns, width=width, height=height, **attrs)


def _rect(box: tuple[float, float, float, float], fill: str, tip: str) -> str:
    x, y, width, height = (float(v) for v in box)
    tooltip = _el("title", _esc(tip))
    return _el("rect", tooltip, x=x, y=y, width=max(width, 0.0), height=max(height, 0.0), fill=fill)


def _line(x1: float, y1: float, x2: float, y2: float, cls: str) -> str:
    stroke = "#333" if cls == "axis" else "#ddd"  # as an attribute too: the SVG alone still draws
    return _el(
        "line", x1=float(x1), y1=float(y1), x2=float(x2), y2=float(y2), class_=cls, stroke=stroke
    )


def _text(x: float, y: float, label: str, anchor: str = "start", **attrs: object) -> str:
    return _el("text", _esc(label), x=float(x), y=float(y), text_anchor=anchor, **attrs)


def _cell_label(x: float, y: float, cell: _Cell, label: str, rotate: bool = False) -> str:
    """A cell's axis label, coloured by outcome, with its id and reason as tooltip."""
    tip = _el("title", _esc(f"{cell.cell}: {cell.outcome} {cell.reason}".strip()))
    turn = {"transform": f"rotate(-90 {x:.1f} {y:.1f})"} if rotate else {}
    colour = _outcome_class(cell.outcome)
    return _el("text", tip + _esc(label), x=x, y=y, text_anchor="end", class_=colour, **turn)


def _legend(entries: Sequence[tuple[str, str]], width: float) -> tuple[list[str], float]:
    """Colour swatches in rows across ``width``; returns the elements and the height used."""
    parts: list[str] = []
    x, y = 8.0, 4.0
    for label, colour in entries:
        item_w = 24 + 6.5 * len(label)
        if x + item_w > width and x > 8:
            x, y = 8.0, y + 16
        parts += [_rect((x, y, 10, 10), colour, label), _text(x + 14, y + 9, label)]
        x += item_w
    return parts, (y + 20 if entries else 4.0)


def _ticks(peak: float) -> tuple[float, ...]:
    """Integer axis ticks from 0 to at least ``peak`` in 1-2-5 steps; never a zero range."""
    if peak <= 0:
        return (0.0, 1.0)
    rough = peak / 4
    magnitude = 10.0 ** math.floor(math.log10(rough))
    step = max(1.0, next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= rough))
    return tuple(step * i for i in range(math.ceil(peak / step) + 1))


def _recorded_svg(topology: str, cells: Sequence[_Cell]) -> str:
    """Grouped vertical bars: per cell, one bar per CPU of its samples recorded."""
    ticks = _ticks(max((cpu.recorded for cell in cells for cpu in cell.cpus), default=0))
    widths = [max(len(cell.cpus), 2) * _BAR_W + _GAP for cell in cells]
    left, width = 64.0, max(64.0 + sum(widths) + 24, 320.0)
    cpus = sorted({cpu.cpu for cell in cells for cpu in cell.cpus})
    parts, top = _legend([(f"cpu{n}", _PALETTE[n % len(_PALETTE)]) for n in cpus], width)
    labels = _short_labels(cells)
    base, mid = top + _PLOT_H, top + _PLOT_H / 2
    low = base + 24 + 6.2 * max((len(label) for label in labels.values()), default=0)
    for tick in ticks:
        y = base - _PLOT_H * tick / ticks[-1]
        parts += [
            _line(left, y, width - 16, y, "grid"),
            _text(left - 4, y + 4, f"{tick:,.0f}", "end"),
        ]
    x = left + _GAP / 2
    for cell, group_w in zip(cells, widths, strict=True):
        parts += _cpu_bars(cell, x, base, ticks[-1])
        parts.append(
            _cell_label(x + (group_w - _GAP) / 2 + 4, base + 8, cell, labels[cell.cell], True)
        )
        x += group_w
    parts += [
        _line(left, top, left, base, "axis"),
        _line(left, base, width - 16, base, "axis"),
        _text(14, mid, "samples recorded", "middle", transform=f"rotate(-90 14 {mid:.1f})"),
        _text((left + width) / 2, low, "cells (one bar per CPU)", "middle"),
    ]
    return _svg("recorded", topology, (width, low + 10), parts)


def _cpu_bars(cell: _Cell, x: float, base: float, top_value: float) -> list[str]:
    """One cell's group: a bar per CPU from ``x``, or "n/a" when it has no CPU data."""
    if not cell.cpus:
        return [_text(x + _BAR_W, base - 4, "n/a", "middle")]
    bars = []
    for i, cpu in enumerate(cell.cpus):
        # At least 1 px when non-zero: recording a little is not recording nothing.
        height = max(_PLOT_H * cpu.recorded / top_value, 1.0 if cpu.recorded > 0 else 0.0)
        box = (x + i * _BAR_W, base - height, _BAR_W - 2, height)
        tip = f"{cell.cell} cpu{cpu.cpu}: {cpu.recorded} recorded"
        bars.append(_rect(box, _PALETTE[cpu.cpu % len(_PALETTE)], tip))
    return bars


def _hbar_svg(plot: _HPlot, topology: str, cells: Sequence[_Cell], row: _Row) -> str:
    """Frame, axes and labels of a horizontal bar plot; ``row`` draws each cell's bars."""
    width = _LEFT + _PLOT_W + 80
    parts, top = _legend(plot.legend, width)
    bottom = top + _ROW_H * max(len(cells), 1)

    def scale(value: float) -> float:
        return _LEFT + _PLOT_W * value / plot.ticks[-1]

    for tick in plot.ticks:
        parts.append(_line(scale(tick), top, scale(tick), bottom, "grid"))
        parts.append(_text(scale(tick), bottom + 14, f"{tick:,.0f}", "middle"))
    labels = _short_labels(cells)
    for i, cell in enumerate(cells):
        y = top + i * _ROW_H
        parts.append(_cell_label(_LEFT - 6, y + _ROW_H / 2 + 4, cell, labels[cell.cell]))
        parts.extend(row(cell, y + 3, scale))
    parts += [
        _line(_LEFT, top, _LEFT, bottom, "axis"),
        _line(_LEFT, bottom, _LEFT + _PLOT_W, bottom, "axis"),
        _text(_LEFT + _PLOT_W / 2, bottom + 32, plot.x_label, "middle"),
    ]
    return _svg(plot.kind, topology, (width, bottom + 40), parts)


def _drops_svg(topology: str, cells: Sequence[_Cell], causes: Sequence[str]) -> str:
    """Stacked horizontal bars: per cell, its drops per cause summed over CPUs."""
    colours = {cause: _PALETTE[i % len(_PALETTE)] for i, cause in enumerate(causes)}
    present = {cause for cell in cells for cpu in cell.cpus for cause, _ in cpu.drops}
    peak = max((sum(cell.drop_totals().values()) for cell in cells), default=0)

    def row(cell: _Cell, y: float, scale: _Scale) -> list[str]:
        parts, done = [], 0
        for cause, count in sorted(cell.drop_totals().items()):
            if count > 0:
                box = (scale(done), y, scale(done + count) - scale(done), _ROW_H - 6)
                parts.append(_rect(box, colours[cause], f"{cell.cell}: {cause} {count}"))
                done += count
        parts.append(_text(scale(done) + 4, y + 12, f"{done:,}" if cell.cpus else "no data"))
        return parts

    legend = tuple((cause, colours[cause]) for cause in causes if cause in present)
    plot = _HPlot("drops", "drops (sum over CPUs)", _ticks(peak), legend)
    return _hbar_svg(plot, topology, cells, row)


def _nmi_svg(topology: str, cells: Sequence[_Cell]) -> str:
    """Horizontal bars 0–100 %: per cell, the share of its overflows taken in NMI."""

    def row(cell: _Cell, y: float, scale: _Scale) -> list[str]:
        track = _rect((scale(0), y, scale(100) - scale(0), _ROW_H - 6), "#eee", "0–100 %")
        share = cell.nmi_share()
        if share is None:
            return [track, _text(scale(0) + 4, y + 12, "n/a (no overflow)")]
        # Never zero-width: an "nmi off" cell shows a sliver at 0 %, not nothing.
        bar_w = max(scale(100 * share) - scale(0), 2.0)
        colour = _NMI_COLOURS.get(cell.axis("nmi"), "#7f7f7f")
        label = f"{100 * share:.1f} %"
        bar = _rect((scale(0), y, bar_w, _ROW_H - 6), colour, f"{cell.cell}: NMI share {label}")
        return [track, bar, _text(scale(0) + bar_w + 4, y + 12, label)]

    modes = dict.fromkeys(cell.axis("nmi") for cell in cells)
    legend = tuple((f"nmi {m}", _NMI_COLOURS.get(m, "#7f7f7f")) for m in modes if m)
    plot = _HPlot("nmi", "NMI share of overflows (%)", (0.0, 25.0, 50.0, 75.0, 100.0), legend)
    return _hbar_svg(plot, topology, cells, row)


def _write_text(path: Path, text: str) -> Path:
    """Write via a temporary file and rename, so readers never see half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
    return path
