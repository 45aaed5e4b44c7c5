"""``invoke bench --test-wall --against REV``: ``invoke test`` of this tree and REV side by side.

Timings of one host differ with its load (design.md §2: compare side by side, never
against a number from another day), so the two trees run alternately in one
session, each as its own ``invoke test`` process from its own tree, and each run
records the load average before it::

    tree = export_revision("HEAD~3", workdir)           # git archive, unpacked
    result = compare_test_wall(tree, "HEAD~3", TestWall(cpus=8, keyword="perf"))
    result["this_median_s"], result["against_median_s"], result["ratio"]

Both use this tree's Python environment and the same build cache (images and
snapshots are shared; an agent the other tree renders differently is built
apart, by its own key).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.errors import ConfigError
from harness.paths import REPO_ROOT

INVOKE = (sys.executable, "-m", "invoke")
#: Runs ``argv`` in ``cwd``, its output into the log file; returns wall seconds, exit status.
Runner = Callable[[Sequence[str], Path, Path], tuple[float, int]]


@dataclass(frozen=True, slots=True)
class TestWall:
    """What ``invoke test`` runs for the comparison."""

    __test__ = False  # not a pytest class

    cpus: int = 8
    keyword: str | None = None  # ``-k``: the tests to time (None: the whole tier)
    rounds: int = 1  # REV then this tree, this many times
    #: One untimed run of each tree first: agents whose template changed since they were
    #: cached are built there, not in the first timed run (24.4 s of test time, a sixth
    #: of a round's wall on 8 vCPUs, went to builds in this tree's first round once).
    warmup: bool = False


def export_revision(rev: str, into: Path, *, repo: Path = REPO_ROOT) -> Path:
    """The tree of commit ``rev`` of ``repo``, unpacked under ``into`` (replaced if there).

    Blocks for ``git archive`` and ``tar`` (seconds).

    :raise ConfigError: ``rev`` names no commit of ``repo``.
    """
    found = subprocess.run(["git", "-C", str(repo), "rev-parse", "--verify", f"{rev}^{{commit}}"],
                           capture_output=True, text=True, check=False)  # fmt: skip
    if found.returncode != 0:
        raise ConfigError(f"--against {rev}: not a commit of {repo} ({found.stderr.strip()})")
    commit = found.stdout.strip()
    tree = into / f"against-{commit[:12]}"
    subprocess.run(["rm", "-rf", str(tree)], check=True)
    tree.mkdir(parents=True)
    with subprocess.Popen(["git", "-C", str(repo), "archive", commit],
                          stdout=subprocess.PIPE) as archive:  # fmt: skip
        subprocess.run(["tar", "-x", "-C", str(tree)], stdin=archive.stdout, check=True)
    if archive.returncode != 0:
        raise ConfigError(f"--against {rev}: git archive failed")
    return tree


def compare_test_wall(
    tree: Path, rev: str, wall: TestWall, *, here: Path = REPO_ROOT, run: Runner | None = None
) -> dict[str, Any]:
    """Time ``invoke test`` in ``tree`` (REV) and in ``here``, alternately, REV first.

    Each tree's images (``invoke images``: its kernel and rootfs, whose options may
    differ from this tree's) are built first and timed apart (``builds``), so the
    ratio compares test time alone: against 1b246e6, whose kernel was not cached, a
    timed run that compiled it took 551.8 s, about 210 s of it the build (issue 42).
    With ``wall.warmup`` each tree's tier runs once more first, untimed, also in
    ``builds``. Blocks for that and 2 x ``rounds`` tier runs (minutes each). A failed run is
    timed too, its exit status kept beside its time; each run's output is kept beside
    ``tree`` (``images-N.log``, ``run-N.log``).
    """
    runner = run or _wall
    builds: list[dict[str, Any]] = []
    for name, cwd in ((rev, tree), ("this tree", here)):  # images first: never timed as tests
        log = tree.parent / f"images-{len(builds) + 1}.log"
        seconds, status = runner([*INVOKE, "images"], cwd, log)
        builds.append({"tree": name, "wall_s": round(seconds, 1), "status": status,
                       "log": str(log)})  # fmt: skip
    argv = [*INVOKE, "test", "--cpus", str(wall.cpus)]
    argv += ["-k", wall.keyword] if wall.keyword else []
    for name, cwd in ((rev, tree), ("this tree", here)) if wall.warmup else ():
        log = tree.parent / f"warmup-{len(builds) - 1}.log"
        seconds, status = runner(argv, cwd, log)
        builds.append({"tree": name, "what": "warm-up", "wall_s": round(seconds, 1),
                       "status": status, "log": str(log)})  # fmt: skip
    runs: list[dict[str, Any]] = []
    times: dict[str, list[float]] = {rev: [], "this tree": []}
    for _ in range(wall.rounds):
        for name, cwd in ((rev, tree), ("this tree", here)):
            load = [round(x, 2) for x in os.getloadavg()]
            log = tree.parent / f"run-{len(runs) + 1}.log"
            seconds, status = runner(argv, cwd, log)
            times[name].append(round(seconds, 1))
            runs.append({"tree": name, "wall_s": round(seconds, 1), "status": status,
                         "load_average_before": load, "log": str(log)})  # fmt: skip
    theirs, ours = statistics.median(times[rev]), statistics.median(times["this tree"])
    return {"against": rev, "cpus": wall.cpus, "keyword": wall.keyword, "builds": builds,
            "runs": runs,
            "against_median_s": theirs, "this_median_s": ours,
            "ratio": round(ours / theirs, 3) if theirs else None}  # fmt: skip


def _wall(argv: Sequence[str], cwd: Path, log: Path) -> tuple[float, int]:
    """Seconds ``argv`` ran in ``cwd`` (its output into ``log``), its exit status; ≤ 2 hours."""
    started = time.monotonic()
    with log.open("w") as out:
        done = subprocess.run(list(argv), cwd=cwd, check=False, stdout=out,
                              stderr=subprocess.STDOUT, timeout=7200)  # fmt: skip
    return time.monotonic() - started, done.returncode


def format_rows(result: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    """Table rows (measurement, median s, min s, max s) of a `compare_test_wall` result."""
    rows = []
    for name, key in ((result["against"], "against_median_s"), ("this tree", "this_median_s")):
        times = [r["wall_s"] for r in result["runs"] if r["tree"] == name]
        rows.append((f"invoke test --cpus {result['cpus']}, {name}", f"{result[key]:.1f}",
                     f"{min(times):.1f}", f"{max(times):.1f}"))  # fmt: skip
    for build in result.get("builds", []):
        failed = "" if build["status"] == 0 else f" (FAILED, exit {build['status']})"
        what = "invoke test, warm-up" if build.get("what") == "warm-up" else "invoke images"
        rows.append((f"{what}, {build['tree']}, before timing{failed}",
                     f"{build['wall_s']:.1f}", "", ""))  # fmt: skip
    if result["ratio"] is not None:
        rows.append(("this tree / against", f"{result['ratio']:.3f}", "", ""))
    return rows
