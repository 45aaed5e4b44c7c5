"""Flame graphs as inline SVG, from folded stacks (``root;…;leaf N``), pure Python.

The matrix report draws the agent's profile and Linux perf's side by side with
these; the page needs no script and no network. Each frame is a rectangle as wide
as its share of the samples, its callers below it, the leaf on top; hovering shows
its name, samples and share (an SVG ``<title>``)::

    stacks = parse_folded(Path("profile-01-agent.folded").read_text())
    svg = render_flamegraph(stacks, title="agent", width_px=560)

Colours are warm hues from a hash of the name, so a symbol has the same colour in
both graphs; ``[kernel]``, ``[user]`` and ``other`` are grey. A differential graph
(``against=``) colours each frame by its share against the other profile's instead.

Why drawn here and not by a maintained renderer: the report is one static page with no
script and no network, opened from a CI artifact; Brendan Gregg's flamegraph.pl (Perl)
and inferno (Rust) are not Debian 12 packages nor on PyPI, and speedscope is a web
application. The interactive viewers get the files themselves (speedscope's JSON,
pprof's proto: `harness.agent.peer.export`), linked from the report.
"""

from __future__ import annotations

import html
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

ROW_PX = 16
CHAR_PX = 6.5  # an 11 px sans-serif character, about
MIN_PX = 0.5  # narrower frames are not drawn (their share is in the parent's width)
MAX_ROWS = 24  # deeper frames are not drawn: the graph says how many levels it cut
_GREY = frozenset({"[kernel]", "[user]", "other"})


def parse_folded(text: str) -> tuple[tuple[tuple[str, ...], int], ...]:
    """``root;…;leaf N`` lines → (stack, count); malformed lines are skipped."""
    found = []
    for line in text.splitlines():
        stack, _, count = line.rpartition(" ")
        if stack and count.isdigit():
            found.append((tuple(stack.split(";")), int(count)))
    return tuple(found)


@dataclass
class _Node:
    name: str
    count: int = 0
    children: dict[str, _Node] = field(default_factory=dict)


def _tree(stacks: Iterable[tuple[Sequence[str], int]]) -> _Node:
    root = _Node("all")
    for stack, count in stacks:
        node = root
        node.count += count
        for name in stack:
            node = node.children.setdefault(name, _Node(name))
            node.count += count
    return root


def _depth(node: _Node) -> int:
    return 1 + max((_depth(c) for c in node.children.values()), default=0)


def colour(name: str) -> str:
    """A warm colour for ``name`` (the same in every graph), grey for the catch-alls."""
    if name in _GREY or name == "all":
        return "rgb(200,200,200)"
    h = zlib.crc32(name.encode())
    return f"rgb({205 + h % 50},{80 + (h >> 8) % 140},{40 + (h >> 16) % 50})"


def render_flamegraph(
    stacks: Iterable[tuple[Sequence[str], int]],
    *,
    title: str,
    width_px: int = 560,
    against: Iterable[tuple[Sequence[str], int]] | None = None,
) -> str:
    """An ``<svg>`` flame graph of ``stacks``, root at the bottom, ``title`` on top.

    With ``against`` it is a differential flame graph (Brendan Gregg's red/blue): the
    frames of ``stacks``, each coloured by how its share of ``stacks`` differs from the
    share the same path (root to that frame) has in ``against``: red where ``stacks``
    has more, blue where less, full colour at `DIFF_FULL_PP` percentage points, white
    where they agree; the tooltip gives both shares.
    """
    root = _tree(stacks)
    other = _tree(against) if against is not None else None
    if root.count == 0:
        return (f'<svg class="flame" width="{width_px}" height="40" role="img">'
                f'<text x="4" y="16">{_esc(title)}: no samples</text></svg>')  # fmt: skip
    depth = _depth(root)
    rows = min(depth, MAX_ROWS)
    height = (rows + 1) * ROW_PX + 4
    cut = f", {depth - rows} deeper levels not drawn" if depth > rows else ""
    parts = [
        f'<svg class="flame" width="{width_px}" height="{height}" role="img" '
        f'aria-label="{_esc(title)}">',
        f'<text x="4" y="12">{_esc(title)} ({root.count} samples{cut})</text>',
    ]
    canvas = _Canvas(root.count, width_px / root.count, height, other)
    _draw(root, 0.0, 0, canvas, parts, other)
    parts.append("</svg>")
    return "".join(parts)


#: A differential graph's full red or blue: this many percentage points of difference.
DIFF_FULL_PP = 10.0


def diff_colour(difference_pp: float) -> str:
    """Red for more (``difference_pp`` > 0), blue for less, white for none; full at 10 pp."""
    strength = min(abs(difference_pp) / DIFF_FULL_PP, 1.0)
    fade = round(255 * (1 - strength))
    return f"rgb(255,{fade},{fade})" if difference_pp > 0 else f"rgb({fade},{fade},255)"


@dataclass(frozen=True, slots=True)
class _Canvas:
    total: int  # samples in the whole graph
    px: float  # pixels per sample
    height: int
    against: _Node | None = None  # a differential graph's other profile


def _draw(node: _Node, x: float, level: int, canvas: _Canvas, out: list[str],
          other: _Node | None) -> None:  # fmt: skip
    width = node.count * canvas.px
    if width < MIN_PX or level >= MAX_ROWS:
        return
    y = canvas.height - (level + 1) * ROW_PX
    share = 100 * node.count / canvas.total
    label = node.name if len(node.name) * CHAR_PX < width - 4 else ""
    if not label and width > 5 * CHAR_PX:
        label = node.name[: int((width - 4) / CHAR_PX) - 2] + ".."
    fill, beside = colour(node.name), ""
    if canvas.against is not None:
        theirs = 100 * (other.count if other else 0) / max(canvas.against.count, 1)
        fill, beside = diff_colour(share - theirs), f" against {theirs:.1f} %"
    out.append(
        f"<g><title>{_esc(node.name)}: {node.count} samples ({share:.1f} %{beside})</title>"
        f'<rect x="{x:.2f}" y="{y}" width="{width:.2f}" height="{ROW_PX - 1}" '
        f'fill="{fill}" rx="2"/>'
        + (f'<text x="{x + 3:.2f}" y="{y + ROW_PX - 4}">{_esc(label)}</text>' if label else "")
        + "</g>"
    )
    child_x = x
    for child in sorted(node.children.values(), key=lambda c: c.name):
        mate = other.children.get(child.name) if other is not None else None
        _draw(child, child_x, level + 1, canvas, out, mate)
        child_x += child.count * canvas.px


def _esc(text: str) -> str:
    return html.escape(text, quote=True)
