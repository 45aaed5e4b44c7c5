"""What the tasks print, as text: ``tasks.py`` prints it, the harness never does.

One function per piece of a task's output, each a pure function of what the harness
returned (the one exception reads a bundle's ``bundle.json``)::

    print(format_verdicts(result))             # invoke repro: each attempt's verdicts
    if (across := format_across(result)) is not None:
        print(across)                           # the numbers across attempts
    print(format_matrix(name, "github", keyword=None, flavours=()))   # invoke matrix
"""

from __future__ import annotations

import json
from pathlib import Path

from harness.agent.module.build import AgentBuild
from harness.agent.scaffold import Scaffolded
from harness.builder.images import GuestImages
from harness.errors import ConfigError
from harness.matrix.load import get_matrix, github_images, github_matrix, select, with_flavours
from harness.scenarios.deterministic import DeterministicResult
from harness.scenarios.identity import differing, format_rows
from harness.scenarios.repro import ReproResult


def format_verdicts(result: ReproResult) -> str:
    """Each attempt's verdicts, one a line, then how many attempts reproduced."""
    lines = []
    for number, verdicts in enumerate(result.verdicts, 1):
        for verdict in verdicts:
            mark = "held  " if verdict.held else "FAILED"
            lines.append(
                f"attempt {number}: {mark} {verdict.expectation} (observed {verdict.observed})"
            )
    lines.append(f"reproduced in {result.reproduced} of {result.attempts} attempt(s); "
                 f"bundle: {result.bundle}")  # fmt: skip
    return "\n".join(lines)


def format_across(result: ReproResult) -> str | None:
    """How many numbers were identical across the attempts (None for a single attempt).

    Reads the bundle's ``bundle.json`` (every attempt's numbers are there).
    """
    across = json.loads((result.bundle / "bundle.json").read_text())["across_attempts"]
    if result.attempts <= 1:
        return None
    differing_names = list(across["differing"])
    shown = ", ".join(differing_names[:8])
    if len(differing_names) > 8:
        shown += f" and {len(differing_names) - 8} more"
    return (
        f"numbers identical across attempts: {across['identical']} of "
        f"{across['numbers']}; differing: {shown or 'none'} (all in bundle.json)"
    )


def format_deterministic(outcome: DeterministicResult) -> str:
    """A deterministic run's verdicts, notes, number table and how many numbers repeated."""
    lines = [format_verdicts(outcome.repro)]
    lines += [f"note: {note}" for note in outcome.notes]
    lines.append(format_rows(outcome.rows, outcome.headers))
    labels = outcome.witness_labels or tuple(f"attempt {n}" for n, _ in
                                             enumerate(outcome.witnessed, 1))  # fmt: skip
    lines += [f"{label}: {seen.summary()}"
              for label, seen in zip(labels, outcome.witnessed, strict=True)]  # fmt: skip
    if outcome.witness_logs_identical is not None:
        same = "identical" if outcome.witness_logs_identical else "DIFFER"
        lines.append(f"witness logs across attempts: {same}")
    lines.append(f"wall time per run: {', '.join(f'{s:.1f}s' for s in outcome.wall_s)}; "
                 f"bundle: {outcome.repro.bundle}")  # fmt: skip
    different = differing(outcome.rows)
    excluded = sum(row.status == "excluded" for row in outcome.rows)
    lines.append(
        f"numbers identical: {len(outcome.rows) - len(different) - excluded} of "
        f"{len(outcome.rows)}; differing: {len(different)}; excluded by name: {excluded}"
    )
    return "\n".join(lines)


def deterministic_failed(outcome: DeterministicResult) -> bool:
    """Whether a number differed, an attempt's verdicts or witness failed (``repro`` exits 4)."""
    witness = any(seen.status == "FAIL" for seen in outcome.witnessed)
    logs = outcome.witness_logs_identical is False
    return (bool(differing(outcome.rows)) or witness or logs
            or outcome.repro.reproduced != outcome.repro.attempts)  # fmt: skip


def format_matrix(name: str, form: str, *, keyword: str | None, flavours: tuple[str, ...]) -> str:
    """Matrix ``name``'s cells (those matching ``keyword``) in ``form``.

    ``text``: one cell id a line; ``github``: a strategy matrix as JSON; ``images``: the
    kernels its cells boot, once each, as a strategy matrix.

    :raise ConfigError: an unknown matrix, flavour or form.
    """
    chosen = with_flavours(get_matrix(name), flavours)
    if form == "github":
        return json.dumps(github_matrix(chosen, select(chosen, keyword)))
    if form == "images":
        return json.dumps(github_images(chosen, select(chosen, keyword)))
    if form == "text":
        return "\n".join(cell.id for cell in select(chosen, keyword))
    raise ConfigError(f"--format takes text, github or images, not {form!r}")


def format_export(target: Path, build: AgentBuild, images: GuestImages) -> str:
    """Where ``invoke agent`` wrote the sources and the module, and how to load it."""
    return "\n".join((
        f"generated sources: {target / 'src'}",
        f"module:            {target / build.ko.name}  (for {images.kernel_release})",
        f"load it with:      {(target / 'insmod.txt').read_text().strip()}",
    ))  # fmt: skip


def format_new_flavour(made: Scaffolded) -> str:
    """The files ``invoke new-flavour`` wrote, and the commands that try the new flavour."""
    return "\n".join((
        *(f"  {path}" for path in made.files),
        f"wrote flavour {made.name} (package {made.package}) into {made.out}",
        f"its unit tests:    python -m pytest {made.out / 'tests'}",
        f"in a guest:        invoke test --cpus 2 --flavour {made.name} "
        f"--flavour-path {made.out}",
        f"its mutants:       invoke mutants --flavour-path {made.out} --flavour {made.name}",
    ))  # fmt: skip
