"""Matrix run reports: ``summary.json`` and one static ``report.html``.

A matrix run executes one pytest cell per combination of axes. Each cell
leaves a summary, a JSON-able dict::

    {"cell": "arm64-linux6.1-2s2cl1c2t-tprof-nmi_on-tcg-default",
     "axes": {"arch": "arm64", "topology": "2s2cl1c2t", "flavour": "tprof",
              "nmi": "on", "accel": "tcg", "variant": "default", "kernel": "6.1"},
     "outcome": "passed",            # or "failed", "skipped", "error"
     "reason": "",                   # skip reason or first failure line
     "duration_s": 12.3,
     "nodeid": "tests/matrix/test_matrix.py::test_cell[...]",
     "cpus": [{"cpu": 0, "irq": 1771, "overflows": 1771, "recorded": 1771, "undelivered": 31,
               "drops": {"overflow": 0, "dropbuf_sample": 0},   # cause -> count
               "nmi_share": 1.0}],   # share of overflows taken in NMI; null: none
     "violations": ["COUNT on CPU 1: expected ..., observed ..."],
     "profile": {"agent": "main;leaf 30 ...", "perf": "main;leaf 31 ...",  # folded stacks
                 "test": "PROFILE: chi2 0.1 vs 24.3 ..."}}                # optional

``axes`` may hold any names (``topology`` groups the plots), ``drops`` any
causes. A missing or mistyped field renders as empty or zero rather than
failing: the report of a broken run is the one most wanted. ``summary.json``
wraps the cells as ``{"matrix", "started_at", "wall_s", "workers", "kernels",
"totals": {outcome: count}, "cells": [...]}`` (``kernels``: each kernel the cells
booted, named with its source, e.g. ``6.12 (linux-source-6.12 6.12.117-1~deb12u1)``)::

    path = write_summary(cells, run_dir, matrix="smoke", started_at=stamp,
                         wall_s=812.4, workers=2)
    write_html(json.loads(path.read_text()), run_dir)   # run_dir/report.html

The page is self-contained (inline CSS, hand-built SVG, no scripts, no
network): totals, a table of cells with the command that reruns each alone,
per topology three plots (samples recorded per CPU, drops per cause, NMI
share, drawn by :mod:`harness.matrix.plots`), then each cell's per-CPU table
and violations, and, where the cell ran Linux perf beside the agent, the agent's
and perf's flame graphs side by side (:mod:`harness.matrix.flamegraph`). All text
is escaped.
"""

from __future__ import annotations

import html
import json
import math
import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.agent.peer.export import pprof, speedscope
from harness.agent.peer.symbols import Profile
from harness.matrix.flamegraph import parse_folded, render_flamegraph
from harness.matrix.plots import OUTCOME_STYLE, outcome_class, render_plots

OUTCOMES = ("passed", "failed", "error", "skipped")
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
    ".flames{display:flex;flex-wrap:wrap;gap:1em;align-items:flex-end}"
    "svg.flame text{font-size:11px}"
) + "".join(
    f".badge.o-{o}{{background:{c}}}section.o-{o}{{border-color:{c}}}"
    f"svg text.o-{o}{{fill:{c}}}tr.o-{o}{{background:{tint}}}"
    for o, (c, tint) in OUTCOME_STYLE.items()
)


@dataclass(frozen=True, slots=True)
class _Cpu:
    cpu: int
    irq: int | None  # the guest kernel's PMU interrupts; None: not read
    overflows: int
    recorded: int
    undelivered: int  # periods the emulator never raised as an overflow in time
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
    profile: tuple[tuple[str, str], ...] = ()  # (side, folded stacks): agent, perf; test line
    unjudged: int | None = None  # oracle parts that compared nothing; None: not counted

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
    kernels: Sequence[str] = (),
) -> Path:
    """Write ``out/summary.json`` (creating ``out``), cells in their order; return its path.

    :raise TypeError: a cell holds something JSON cannot represent.
    """
    summary = {
        "matrix": matrix,
        "started_at": started_at,
        "wall_s": wall_s,
        "workers": workers,
        "kernels": list(kernels),
        "totals": count_outcomes(str(cell.get("outcome", "error")) for cell in cells),
        "cells": [dict(cell) for cell in cells],
    }
    return _write_text(out / "summary.json", json.dumps(summary, indent=2) + "\n")


def write_html(summary: Mapping[str, object], out: Path) -> Path:
    """Write ``out/report.html`` (creating ``out``) and return its path.

    Each cell's profiles are written beside it first (`write_profiles`), and linked.
    """
    cells = tuple(_parse_cell(_mapping(raw)) for raw in _sequence(summary.get("cells")))
    return _write_text(out / "report.html", render_html(summary, write_profiles(cells, out)))


#: Where a report's profile files go, under its directory.
PROFILES_DIR = "profiles"


def write_profiles(cells: Sequence[_Cell], out: Path) -> dict[str, tuple[tuple[str, str], ...]]:
    """Each cell's profiles as speedscope's JSON and pprof's proto under ``out/profiles``.

    Returns, by cell anchor, (label, path relative to ``out``) of each file written.
    """
    found: dict[str, tuple[tuple[str, str], ...]] = {}
    for cell in cells:
        folded = {side: text for side, text in cell.profile if side in ("agent", "perf")}
        if not folded:
            continue
        profiles = {side: Profile(parse_folded(text)) for side, text in folded.items()}
        stem = f"{PROFILES_DIR}/{_anchor(cell)}"
        files = [("speedscope (both)", f"{stem}.speedscope.json",
                  speedscope(profiles, name=cell.cell).encode())]  # fmt: skip
        files += [(f"pprof ({side})", f"{stem}-{side}.pb.gz", pprof(profile))
                  for side, profile in profiles.items()]  # fmt: skip
        for _, relative, data in files:
            path = out / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        found[_anchor(cell)] = tuple((label, relative) for label, relative, _ in files)
    return found


def rerun_command(matrix: str, cell: str) -> str:
    """The shell command that reruns one cell of ``matrix`` alone."""
    return shlex.join(["invoke", "test", "--matrix", matrix, "-k", cell])


def render_html(
    summary: Mapping[str, object], files: Mapping[str, Sequence[tuple[str, str]]] | None = None
) -> str:
    """The whole report page for a ``summary.json`` document.

    ``files``: by cell anchor, (label, relative path) of the profile files to link.
    """
    matrix = str(summary.get("matrix", ""))
    cells = tuple(_parse_cell(_mapping(raw)) for raw in _sequence(summary.get("cells")))
    causes = sorted({cause for cell in cells for cpu in cell.cpus for cause, _ in cpu.drops})
    head = '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
    body = [
        f"{head}<title>Matrix {_esc(matrix)}</title><style>{_CSS}</style></head><body>",
        _header(summary, cells),
        _summary_table(matrix, cells),
        *(render_plots(topology, group, causes) for topology, group in _by_topology(cells).items()),
        "<h2>Cell details</h2>",
        *(_details(matrix, cell, (files or {}).get(_anchor(cell), ())) for cell in cells),
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
        irq=None if (irq := _float(raw.get("irq"))) is None else int(irq),
        overflows=_int(raw.get("overflows")),
        recorded=_int(raw.get("recorded")),
        undelivered=_int(raw.get("undelivered")),
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
        profile=tuple((str(k), str(v)) for k, v in _mapping(raw.get("profile")).items()),
        unjudged=None if raw.get("unjudged") is None else _int(raw.get("unjudged")),
    )


def _by_topology(cells: Sequence[_Cell]) -> dict[str, list[_Cell]]:
    groups: dict[str, list[_Cell]] = {}
    for cell in cells:
        groups.setdefault(cell.axis("topology") or "(no topology)", []).append(cell)
    return groups


# -- HTML ---------------------------------------------------------------------


def _esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def _badge(outcome: str, text: str = "") -> str:
    return f'<span class="badge {outcome_class(outcome)}">{_esc(text or outcome)}</span>'


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
    kernels = ", ".join(str(name) for name in _sequence(summary.get("kernels")))
    named = f"<p>kernels: {_esc(kernels)}</p>" if kernels else ""
    return f"<header><h1>Matrix {matrix}</h1><p>{facts}</p>{named}<p>{badges}</p></header>"


def _summary_table(matrix: str, cells: Sequence[_Cell]) -> str:
    axis_names = list(dict.fromkeys(name for cell in cells for name, _ in cell.axes))
    columns = ["cell", "outcome", *axis_names, "duration", "unjudged", "reason", "rerun alone"]
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
        f'<td class="num">{"–" if cell.unjudged is None else cell.unjudged}</td>',
        f"<td>{_esc(cell.reason)}</td>",
        f"<td><code>{_esc(rerun_command(matrix, cell.cell))}</code></td>",
    ]
    return f'<tr class="{outcome_class(cell.outcome)}">{"".join(cells)}</tr>'


def _details(matrix: str, cell: _Cell, files: Sequence[tuple[str, str]] = ()) -> str:
    causes = list(dict.fromkeys(cause for cpu in cell.cpus for cause, _ in cpu.drops))
    columns = ["cpu", "kernel irq", "overflows", "recorded", *(f"drops: {c}" for c in causes)]
    columns += ["undelivered", "delivered", "nmi share"]
    head = "".join(f"<th>{_esc(name)}</th>" for name in columns)
    rows = "".join(_cpu_row(cpu, causes) for cpu in cell.cpus)
    table = f"<table><tr>{head}</tr>{rows}</table>" if cell.cpus else "<p>no per-CPU data</p>"
    items = "".join(f"<li><code>{_esc(v)}</code></li>" for v in cell.violations)
    violations = f"<ul>{items}</ul>" if items else "<p>no violations</p>"
    reason = f'<p class="reason">{_esc(cell.outcome)}: {_esc(cell.reason)}</p>'
    axes = ", ".join(f"{name}={value}" for name, value in cell.axes)
    return (
        f'<section class="cell {outcome_class(cell.outcome)}" id="{_anchor(cell)}">'
        f"<h3>{_badge(cell.outcome)} {_esc(cell.cell)}</h3>{reason if cell.reason else ''}"
        f"<p>{_esc(axes)} · {cell.duration_s:.1f} s · <code>{_esc(cell.nodeid)}</code></p>"
        f"<p>rerun: <code>{_esc(rerun_command(matrix, cell.cell))}</code></p>"
        f"{table}{_flames(cell, files)}<h4>Violations</h4>{violations}</section>"
    )


def _flames(cell: _Cell, files: Sequence[tuple[str, str]] = ()) -> str:
    """The agent's and perf's flame graphs side by side, and the agent's against perf's.

    '' when the cell has no profile. PROFILE's verdict line heads them; ``files``
    (label, relative path) are linked under them.
    """
    found = dict(cell.profile)
    sides = [side for side in ("agent", "perf") if side in found]
    if not sides:
        return ""
    titles = {"agent": "the agent", "perf": "Linux perf"}
    graphs = "".join(
        f"<figure>{render_flamegraph(parse_folded(found[side]), title=titles[side])}</figure>"
        for side in sides
    )
    if len(sides) == 2:
        title = "the agent against perf (red: more, blue: less)"
        diff = render_flamegraph(parse_folded(found["agent"]), title=title,
                                 against=parse_folded(found["perf"]))  # fmt: skip
        graphs += f"<figure>{diff}</figure>"
    test = f"<p><code>{_esc(found['test'])}</code></p>" if "test" in found else ""
    links = " · ".join(f'<a href="{_esc(path)}">{_esc(label)}</a>' for label, path in files)
    opened = f"<p>open in a viewer: {links}</p>" if links else ""
    return (f'<h4>Profile (agent beside Linux perf)</h4>{test}<div class="flames">{graphs}</div>'
            f"{opened}")  # fmt: skip


def _cpu_row(cpu: _Cpu, causes: Sequence[str]) -> str:
    drops = dict(cpu.drops)
    irq = "–" if cpu.irq is None else cpu.irq
    values = [cpu.cpu, irq, cpu.overflows, cpu.recorded, *(drops.get(c, 0) for c in causes)]
    delivered = _percent(cpu.overflows, cpu.overflows + cpu.undelivered)
    nmi = "–" if cpu.nmi_share is None else f"{100 * cpu.nmi_share:.1f} %"
    cells = [*values, cpu.undelivered, delivered, nmi]
    return "<tr>" + "".join(f'<td class="num">{v}</td>' for v in cells) + "</tr>"


def _percent(part: int, whole: int) -> str:
    return "–" if whole <= 0 else f"{100 * part / whole:.1f} %"


def _write_text(path: Path, text: str) -> Path:
    """Write via a temporary file and rename, so readers never see half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
    return path
