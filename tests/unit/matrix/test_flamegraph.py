"""Flame graphs: folded stacks in, inline SVG out; the matrix report draws two per profiled cell."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

from harness.matrix.flamegraph import colour, diff_colour, parse_folded, render_flamegraph
from harness.matrix.report import render_html, write_html

FOLDED = "main;outer;middle;leaf 60\nmain;outer;other 20\n[kernel];cpu_do_idle 20\nbad line\n"


class _Rects(HTMLParser):
    """Each <rect> with its tooltip (the <title> in the same <g>)."""

    def __init__(self) -> None:
        super().__init__()
        self.rects: list[dict[str, str]] = []
        self.titles: list[str] = []
        self._in_title = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "rect":
            self.rects.append({k: v or "" for k, v in attrs})
        self._in_title = tag == "title"

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.titles.append(data)
            self._in_title = False


def test_folded_lines_parse_and_malformed_ones_are_skipped() -> None:
    assert parse_folded(FOLDED) == (
        (("main", "outer", "middle", "leaf"), 60),
        (("main", "outer", "other"), 20),
        (("[kernel]", "cpu_do_idle"), 20),
    )


def test_each_frame_is_as_wide_as_its_share_and_callers_sit_below() -> None:
    found = _Rects()
    found.feed(render_flamegraph(parse_folded(FOLDED), title="agent", width_px=500))
    by_name = {t.split(":")[0]: r for t, r in zip(found.titles, found.rects, strict=True)}
    assert float(by_name["all"]["width"]) == 500
    assert float(by_name["main"]["width"]) == 400  # 80 of 100 samples
    assert float(by_name["leaf"]["width"]) == 300
    assert float(by_name["cpu_do_idle"]["width"]) == 100
    depth = [int(by_name[n]["y"]) for n in ("all", "main", "outer", "middle", "leaf")]
    assert depth == sorted(depth, reverse=True)  # the leaf on top
    assert "leaf: 60 samples (60.0 %)" in found.titles


def test_a_symbol_has_one_colour_in_every_graph_and_catch_alls_are_grey() -> None:
    assert colour("leaf") == colour("leaf") != colour("middle")
    assert colour("[user]") == colour("other") == "rgb(200,200,200)"


def test_a_deep_stack_is_cut_and_says_so() -> None:
    deep = ((tuple(f"f{i}" for i in range(40)), 5),)
    found = _Rects()
    svg = render_flamegraph(deep, title="perf")
    found.feed(svg)
    assert len(found.rects) == 24  # all, then 23 of the 40 frames
    assert "perf (5 samples, 17 deeper levels not drawn)" in svg


def test_no_samples_says_so() -> None:
    assert "perf: no samples" in render_flamegraph((), title="perf")


def test_names_are_escaped() -> None:
    svg = render_flamegraph(((("<script>",), 1),), title="a&b")
    assert "<script>" not in svg
    assert "&lt;script&gt;" in svg
    assert "a&amp;b" in svg


def test_the_report_draws_the_agent_and_perf_side_by_side() -> None:
    profile = {"agent": FOLDED, "perf": FOLDED, "test": "PROFILE: chi2 0.0 vs 16.3"}
    cell = {"cell": "c1", "outcome": "passed", "axes": {"flavour": "dt"}, "profile": profile}
    page = render_html({"matrix": "quick", "cells": [cell]})
    flames = re.findall(r'<svg class="flame"[^>]*aria-label="([^"]*)"', page)
    assert flames == ["the agent", "Linux perf", "the agent against perf (red: more, blue: less)"]
    assert "PROFILE: chi2 0.0 vs 16.3" in page
    assert "<script" not in page.lower()
    assert not re.search(r"""(src|href)=["']?https?:""", page)  # nothing to fetch


def test_a_cell_without_a_profile_draws_no_flame_graph() -> None:
    page = render_html({"matrix": "quick", "cells": [{"cell": "c1", "outcome": "passed"}]})
    assert 'class="flame"' not in page


def test_a_differential_graph_colours_by_share_against_the_other() -> None:
    agent = [(("main", "leaf"), 80), (("main", "cold"), 20)]
    perf = [(("main", "leaf"), 50), (("main", "cold"), 50)]
    svg = render_flamegraph(agent, title="diff", against=perf)
    fills = dict(re.findall(r"<title>(\w+): [^<]*</title><rect [^>]*fill=\"([^\"]+)\"", svg))
    assert fills["leaf"] == diff_colour(30.0) == "rgb(255,0,0)"  # 80 % against 50 %: red
    assert fills["cold"] == diff_colour(-30.0) == "rgb(0,0,255)"  # 20 % against 50 %: blue
    assert fills["main"] == diff_colour(0.0) == "rgb(255,255,255)"  # both 100 %
    assert "leaf: 80 samples (80.0 % against 50.0 %)" in svg


def test_the_report_links_each_cells_profile_files(tmp_path: Path) -> None:
    profile = {"agent": FOLDED, "perf": FOLDED, "test": "PROFILE: chi2 0.0 vs 16.3"}
    cell = {"cell": "c1", "outcome": "passed", "axes": {"flavour": "dt"}, "profile": profile}
    page = write_html({"matrix": "quick", "cells": [cell]}, tmp_path).read_text()
    links = re.findall(r'<a href="(profiles/[^"]+)"', page)
    assert len(links) == 3  # speedscope (both), pprof agent, pprof perf
    assert all((tmp_path / link).is_file() for link in links)
