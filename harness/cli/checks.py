"""Static checks and the unit tier, run in parallel: ``invoke check``.

Each check is a command; they run at once (two cores: lint and types are
light) and the outcome is a list of `CheckResult`. The GitHub workflows are
validated against GitHub's workflow schema (check-jsonschema ships it, so this
works offline); GitHub itself never runs them here::

    results = run_checks(static_checks())     # True when all passed
"""

from __future__ import annotations

import logging
import random
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.paths import REPO_ROOT
from harness.process import die_with_parent

LOG = logging.getLogger(__name__)
_BIN = Path(sys.executable).parent

Check = tuple[str, tuple[str, ...]]

#: The GitHub workflows, checked against GitHub's schema.
WORKFLOWS = tuple(
    sorted(str(p.relative_to(REPO_ROOT)) for p in REPO_ROOT.glob(".github/workflows/*.yml"))
)
#: (name, argv) of the lint and type checks; tools come from the same environment.
LINT_CHECKS: tuple[Check, ...] = (
    ("ruff check", (str(_BIN / "ruff"), "check", ".")),
    ("ruff format", (str(_BIN / "ruff"), "format", "--check", ".")),
    ("mypy --strict", (str(_BIN / "mypy"),)),
    ("workflow schema", (str(_BIN / "check-jsonschema"), "--builtin-schema",
                         "vendor.github-workflows", *WORKFLOWS)),
)  # fmt: skip


def unit_tier(seed: int | None = None) -> Check:
    """The unit tier, its tests shuffled across modules (pytest-random-order) by ``seed``.

    A test that passes only after, or before, another is a leak between them (issue
    42); one order a run, chosen anew each time and named in the check's name so a
    failing order can be run again: ``pytest tests/unit -p random_order
    --random-order-bucket=global --random-order-seed=N``.
    """
    seed = random.randrange(1_000_000) if seed is None else seed
    return (f"unit tier (random order, seed {seed})",
            (sys.executable, "-m", "pytest", "-q", "tests/unit", "-p", "random_order",
             "--random-order-bucket=global", f"--random-order-seed={seed}"))  # fmt: skip


def static_checks(seed: int | None = None) -> tuple[Check, ...]:
    """Lint, types and the unit tier in a random order: ``invoke check``, and CI's first step."""
    return (*LINT_CHECKS, unit_tier(seed))


@dataclass(frozen=True, slots=True)
class CheckResult:
    """One finished check."""

    name: str
    status: int
    output: str
    duration_s: float


def run_checks(checks: Sequence[tuple[str, Sequence[str]]], *, timeout_s: float = 900.0) -> bool:
    """Run ``checks`` in parallel; log each outcome; True when every one passed."""
    started = time.monotonic()
    procs = [(name, argv, _start(argv)) for name, argv in checks]
    results = []
    for name, argv, proc in procs:
        if proc is None:
            output = f"{argv[0]} is not installed; `. ./bootstrap.sh` installs the dev tools"
            results.append(CheckResult(name, 127, output, time.monotonic() - started))
            continue
        try:
            output, _ = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            output, _ = proc.communicate()
            output += f"\n(killed after {timeout_s:.0f}s)"
        results.append(CheckResult(name, proc.returncode, output, time.monotonic() - started))
    for result in results:
        if result.status == 0:
            LOG.info("PASS %s (%.1fs)", result.name, result.duration_s)
        else:
            LOG.error("FAIL %s (status %d):\n%s", result.name, result.status,
                      result.output[-6000:])  # fmt: skip
    return all(result.status == 0 for result in results)


def _start(argv: Sequence[str]) -> subprocess.Popen[str] | None:
    """Start one check, its output captured; None when its program is not installed."""
    try:
        return subprocess.Popen(list(argv), cwd=REPO_ROOT, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True,
                                preexec_fn=die_with_parent)  # noqa: PLW1509  # fmt: skip
    except FileNotFoundError:
        return None
