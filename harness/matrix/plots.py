"""Hand-built SVG bar charts for the matrix report (:mod:`harness.matrix.report`).

Per topology, three inline plots of the matrix cells: samples recorded per CPU
(grouped vertical bars, one per CPU), drops per cause summed over CPUs (stacked
horizontal bars) and the share of overflows taken in NMI (0–100 %). Output is
plain SVG markup in strings, no scripts; all text and attributes are escaped.
Cells are anything shaped like :class:`PlotCell` (the report's parsed cells are)::

    causes = sorted({cause for cell in cells for cpu in cell.cpus for cause, _ in cpu.drops})
    html = render_plots("2s2cl1c2t", cells, causes)
    # '<h2>Topology 2s2cl1c2t</h2><div class="plots"><figure>...<svg ...>...</svg>...'

Cell labels carry an ``o-<outcome>`` class (:func:`outcome_class`); the report's
CSS, built from :data:`OUTCOME_STYLE`, colours them and its badges alike.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

# outcome -> (badge and label colour, table row tint); unknown outcomes look like "error".
OUTCOME_STYLE = {
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
_LEFT, _PLOT_W, _ROW_H = 200.0, 260.0, 22.0  # horizontal plots: label column, bars, row
_BAR_W, _GAP, _PLOT_H = 12.0, 18.0, 150.0  # grouped vertical bars: bar, between groups, axis


class PlotCpu(Protocol):
    """What a plot reads of one CPU of a cell."""

    @property
    def cpu(self) -> int:
        """The CPU's number."""

    @property
    def recorded(self) -> int:
        """Samples the flavour recorded on it."""

    @property
    def drops(self) -> Sequence[tuple[str, int]]:
        """(cause, count) of what it dropped."""


class PlotCell(Protocol):
    """What a plot reads of one matrix cell."""

    @property
    def cell(self) -> str:
        """The cell's id."""

    @property
    def outcome(self) -> str:
        """``passed``, ``failed``, ``skipped`` or ``error``."""

    @property
    def reason(self) -> str:
        """The skip reason or the first failure line."""

    @property
    def cpus(self) -> Sequence[PlotCpu]:
        """Its CPUs' numbers."""

    def axis(self, name: str) -> str:
        """The cell's value on axis ``name`` (``""``: none)."""

    def drop_totals(self) -> Mapping[str, int]:
        """Drops per cause over all CPUs."""

    def nmi_share(self) -> float | None:
        """The overflow-weighted share taken in NMI; None: no CPU had one."""


_Scale = Callable[[float], float]
_Row = Callable[[PlotCell, float, _Scale], list[str]]


@dataclass(frozen=True, slots=True)
class _HPlot:
    """A horizontal bar plot: one row per cell, x from 0 to ``ticks[-1]``."""

    kind: str
    x_label: str
    ticks: tuple[float, ...]
    legend: tuple[tuple[str, str], ...]


def outcome_class(outcome: str) -> str:
    """The CSS class of an outcome: ``o-<outcome>``, unknown outcomes as ``o-error``."""
    return "o-" + (outcome if outcome in OUTCOME_STYLE else "error")


def render_plots(topology: str, cells: Sequence[PlotCell], causes: Sequence[str]) -> str:
    """One topology's heading and its three plots.

    ``causes`` lists the drop causes in colour order; pass the same list for every
    topology so that a cause keeps its colour across the page.

    :raise KeyError: a cell has a drop cause missing from ``causes``.
    """
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


def _cell_label(x: float, y: float, cell: PlotCell, label: str, rotate: bool = False) -> str:
    """A cell's axis label, coloured by outcome, with its id and reason as tooltip."""
    tip = _el("title", _esc(f"{cell.cell}: {cell.outcome} {cell.reason}".strip()))
    turn = {"transform": f"rotate(-90 {x:.1f} {y:.1f})"} if rotate else {}
    colour = outcome_class(cell.outcome)
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


def _recorded_svg(topology: str, cells: Sequence[PlotCell]) -> str:
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


def _cpu_bars(cell: PlotCell, x: float, base: float, top_value: float) -> list[str]:
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


def _hbar_svg(plot: _HPlot, topology: str, cells: Sequence[PlotCell], row: _Row) -> str:
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


def _drops_svg(topology: str, cells: Sequence[PlotCell], causes: Sequence[str]) -> str:
    """Stacked horizontal bars: per cell, its drops per cause summed over CPUs."""
    colours = {cause: _PALETTE[i % len(_PALETTE)] for i, cause in enumerate(causes)}
    present = {cause for cell in cells for cpu in cell.cpus for cause, _ in cpu.drops}
    peak = max((sum(cell.drop_totals().values()) for cell in cells), default=0)

    def row(cell: PlotCell, y: float, scale: _Scale) -> list[str]:
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


def _nmi_svg(topology: str, cells: Sequence[PlotCell]) -> str:
    """Horizontal bars 0–100 %: per cell, the share of its overflows taken in NMI."""

    def row(cell: PlotCell, y: float, scale: _Scale) -> list[str]:
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


def _short_labels(cells: Sequence[PlotCell]) -> dict[str, str]:
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


def _esc(text: object) -> str:
    return html.escape(str(text), quote=True)
