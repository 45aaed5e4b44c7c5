from __future__ import annotations

import html
import json
import math
import re
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path

import pytest

from harness.matrix.report import render_html, rerun_command, write_html, write_summary

MATRIX = "smoke"
NODE = "tests/matrix/test_matrix.py::test_cell"
VIOLATION = 'IRQ on CPU 1: expected <= 1771 & "seen" > 0, observed <script>alert(1)</script>'
SKIP_REASON = "needs KVM: /dev/kvm <missing> & nested guests hang"
AXIS_NAMES = ("arch", "topology", "flavour", "nmi", "accel", "variant")
VOID = {"meta", "br", "hr", "img", "input", "link", "col", "wbr", "source", "area", "base"}


def cpu(n: int, recorded: int, drops: dict[str, int], nmi_share: float | None) -> dict[str, object]:
    overflows = recorded + sum(drops.values())
    return {
        "cpu": n,
        "overflows": overflows,
        "recorded": recorded,
        "irq": overflows,
        "undelivered": recorded // 50,
        "drops": drops,
        "nmi_share": nmi_share,
    }


def cell(cell_id: str, outcome: str, **fields: object) -> dict[str, object]:
    """A cell summary whose axes are read back from its id."""
    values = cell_id.split("-")
    values[3] = values[3].removeprefix("nmi_")
    base: dict[str, object] = {
        "cell": cell_id,
        "axes": dict(zip(AXIS_NAMES, values, strict=True)),
        "outcome": outcome,
        "reason": "",
        "duration_s": 12.3,
        "nodeid": f"{NODE}[{cell_id}]",
        "cpus": [],
        "violations": [],
    }
    return base | fields


def synthetic_cells() -> list[dict[str, object]]:
    return [
        cell(
            "arm64-2s2cl1c2t-tprof-nmi_on-tcg-default",
            "passed",
            cpus=[
                cpu(n, 1771 - 40 * n, {"overflow": n, "dropbuf_sample": 2 * n}, 1.0)
                for n in range(8)
            ],
        ),
        cell(
            "arm64-2s2cl1c2t-dt-nmi_off-tcg-default",
            "passed",
            duration_s=9.8,
            cpus=[cpu(n, 900, {"nobuf": 3}, 0.0) for n in range(8)],
        ),
        cell(
            "x86_64-1s1cl2c1t-tprof-nmi_on-tcg-default",
            "failed",
            reason="AssertionError: 1 violation",
            cpus=[cpu(0, 1200, {"overflow": 7}, 1.0), cpu(1, 3, {"overflow": 0}, 0.5)],
            violations=[VIOLATION, "NMI on CPU 1: share 50 % < 100 %"],
        ),
        cell("x86_64-1s1cl2c1t-dt-nmi_off-tcg-default", "skipped", reason=SKIP_REASON),
    ]


class Collector(HTMLParser):
    """Checks tag nesting and collects text, ``<svg>`` attributes and ``id``s."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.errors: list[str] = []
        self.svgs: list[dict[str, str | None]] = []
        self.ids: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_startendtag(tag, attrs)
        if tag not in VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "svg":
            self.svgs.append(found)
        if found.get("id"):
            self.ids.append(str(found["id"]))
        self.errors += [
            f"<{tag}> {k}={v!r}" for k, v in attrs if v and re.search(r"\b(nan|inf)\b", v)
        ]

    def handle_endtag(self, tag: str) -> None:
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes {self.stack[-1:] or 'nothing'}")
        else:
            self.stack.pop()

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    def close(self) -> None:
        super().close()
        self.errors += [f"<{tag}> never closed" for tag in self.stack]


def parse(page: str) -> Collector:
    collector = Collector()
    collector.feed(page)
    collector.close()
    return collector


KERNELS = ["6.1 (linux-source-6.1 6.1.192-2)", "6.12 (linux-source-6.12 6.12.117-1~deb12u1)"]


@pytest.fixture
def summary_path(tmp_path: Path) -> Path:
    return write_summary(
        synthetic_cells(),
        tmp_path,
        matrix=MATRIX,
        started_at="2025-01-01T00:00:00Z",
        wall_s=123.4,
        workers=2,
        kernels=KERNELS,
    )


@pytest.fixture
def page(summary_path: Path) -> str:
    return render_html(json.loads(summary_path.read_text()))


def test_summary_round_trips_with_totals(summary_path: Path) -> None:
    assert summary_path.name == "summary.json"
    summary = json.loads(summary_path.read_text())
    assert summary == {
        "matrix": MATRIX,
        "started_at": "2025-01-01T00:00:00Z",
        "wall_s": 123.4,
        "workers": 2,
        "kernels": KERNELS,
        "totals": {"passed": 2, "failed": 1, "error": 0, "skipped": 1},
        "cells": synthetic_cells(),
    }


def test_the_header_names_every_kernel_with_its_source(page: str) -> None:
    header = page.split("<header>", 1)[1].split("</header>", 1)[0]
    assert "kernels: 6.1 (linux-source-6.1 6.1.192-2), 6.12 (linux-source-6.12" in header


def test_html_parses_with_balanced_tags(page: str) -> None:
    collector = parse(page)
    assert collector.errors == []
    assert page.startswith("<!DOCTYPE html>")
    assert len(collector.ids) == len(set(collector.ids)) == len(synthetic_cells())


def test_collector_catches_broken_markup() -> None:
    errors = parse('<p><svg width="nan"><rect></svg></p><div>').errors
    assert errors == ["<svg> width='nan'", "</svg> closes ['rect']", "</p> closes ['rect']",
                      "<p> never closed", "<svg> never closed", "<rect> never closed",
                      "<div> never closed"]  # fmt: skip


def test_one_svg_per_plot_kind_per_topology(page: str) -> None:
    plots = Counter((svg["data-topology"], svg["data-plot"]) for svg in parse(page).svgs)
    expected = {
        (topology, kind)
        for topology in ("2s2cl1c2t", "1s1cl2c1t")
        for kind in ("recorded", "drops", "nmi")
    }
    assert plots == Counter(expected)


def test_every_cell_is_listed_with_its_rerun_command(page: str) -> None:
    text = "".join(parse(page).text)
    for each in synthetic_cells():
        cell_id = str(each["cell"])
        assert cell_id in text
        assert f"invoke test --matrix {MATRIX} -k {cell_id}" in text
        assert f'href="#cell-{cell_id}"' in page
    assert rerun_command("a b", "c") == "invoke test --matrix 'a b' -k c"


def test_violations_and_reasons_are_escaped_and_shown(page: str) -> None:
    text = "".join(parse(page).text)
    assert VIOLATION in text
    assert SKIP_REASON in text
    assert "AssertionError: 1 violation" in text
    assert html.escape(VIOLATION) in page
    assert "<script" not in page.lower()


def test_failed_and_skipped_cells_are_marked_in_the_plots(page: str) -> None:
    assert "tprof-nmi_on (failed)</text>" in page
    assert "dt-nmi_off (skipped)</text>" in page
    assert "n/a (no overflow)" in page


def test_nmi_off_cell_is_drawn_near_zero(page: str) -> None:
    assert "arm64-2s2cl1c2t-dt-nmi_off-tcg-default: NMI share 0.0 %" in page
    assert "arm64-2s2cl1c2t-tprof-nmi_on-tcg-default: NMI share 100.0 %" in page


@pytest.mark.parametrize(
    ("cells", "topologies"),
    [
        ([], 0),
        ([cell("arm64-1s1cl1c1t-tprof-nmi_on-tcg-default", "error")], 1),
        (
            [
                cell(
                    "arm64-1s1cl1c1t-tprof-nmi_on-tcg-default",
                    "passed",
                    cpus=[cpu(0, 0, {}, None), cpu(1, 0, {"overflow": 0}, 0.0)],
                )
            ],
            1,
        ),
        (
            [
                {
                    "cell": "odd",
                    "outcome": "weird",
                    "cpus": [{"cpu": "x", "nmi_share": math.nan}],
                    "duration_s": None,
                    "axes": None,
                    "violations": "not a list",
                }
            ],
            1,
        ),
    ],
    ids=["no-cells", "no-cpus", "all-zero", "malformed"],
)
def test_zero_and_missing_data_render(
    cells: list[dict[str, object]], topologies: int, tmp_path: Path
) -> None:
    path = write_summary(cells, tmp_path, matrix=MATRIX, started_at="", wall_s=0.0, workers=0)
    report = write_html(json.loads(path.read_text()), tmp_path)
    assert report == tmp_path / "report.html"
    collector = parse(report.read_text())
    assert collector.errors == []
    assert len(collector.svgs) == 3 * topologies
