"""`invoke bench --against REV`: REV's tree unpacked, both trees timed alternately."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest

from harness.cli.against import TestWall, compare_test_wall, export_revision, format_rows
from harness.errors import ConfigError


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                          check=True).stdout.strip()  # fmt: skip


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q")
    git(root, "config", "user.email", "t@example.invalid")
    git(root, "config", "user.name", "t")
    (root / "tasks.py").write_text("old\n")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "old")
    (root / "tasks.py").write_text("new\n")
    git(root, "commit", "-q", "-am", "new")
    return root


def test_the_revision_is_unpacked_as_it_was_committed(repo: Path, tmp_path: Path) -> None:
    tree = export_revision("HEAD~1", tmp_path / "out", repo=repo)
    assert (tree / "tasks.py").read_text() == "old\n"
    assert tree.name == f"against-{git(repo, 'rev-parse', 'HEAD~1')[:12]}"
    assert export_revision("HEAD~1", tmp_path / "out", repo=repo) == tree  # replaced, not nested


def test_a_name_that_is_no_commit_is_a_config_error(repo: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--against nope: not a commit"):
        export_revision("nope", tmp_path / "out", repo=repo)


def test_both_trees_run_alternately_rev_first_each_timed_with_its_status(tmp_path: Path) -> None:
    seen: list[tuple[tuple[str, ...], Path]] = []
    walls = iter([(210.0, 0), (5.0, 0), (100.0, 0), (30.0, 0), (120.0, 1), (20.0, 0)])

    def run(argv: Sequence[str], cwd: Path, log: Path) -> tuple[float, int]:
        seen.append((tuple(argv[1:]), cwd))
        log.write_text(f"{cwd.name}\n")
        return next(walls)

    old, new = tmp_path / "old", tmp_path / "new"
    found = compare_test_wall(old, "main", TestWall(cpus=8, keyword="perf", rounds=2),
                              here=new, run=run)  # fmt: skip
    # Each tree's images first, untimed as tests: a kernel REV configures otherwise is
    # built there, not inside its first timed run (issue 42).
    assert seen[:2] == [(("-m", "invoke", "images"), old), (("-m", "invoke", "images"), new)]
    assert [(b["tree"], b["wall_s"]) for b in found["builds"]] == [("main", 210), ("this tree", 5)]
    seen = seen[2:]
    assert [cwd for _, cwd in seen] == [old, new, old, new]
    assert seen[0][0] == ("-m", "invoke", "test", "--cpus", "8", "-k", "perf")
    assert [(r["tree"], r["wall_s"], r["status"]) for r in found["runs"]] == [
        ("main", 100.0, 0), ("this tree", 30.0, 0), ("main", 120.0, 1), ("this tree", 20.0, 0)
    ]  # fmt: skip
    assert (found["against_median_s"], found["this_median_s"], found["ratio"]) == (110, 25, 0.227)
    logs = [Path(r["log"]).read_text() for r in found["runs"]]
    assert logs == ["old\n", "new\n", "old\n", "new\n"]  # each run's output kept
    assert format_rows(found)[0] == ("invoke test --cpus 8, main", "110.0", "100.0", "120.0")
    assert format_rows(found)[-1] == ("this tree / against", "0.227", "", "")
    assert ("invoke images, main, before timing", "210.0", "", "") in format_rows(found)


def test_a_warm_up_runs_each_tree_once_untimed_before_the_rounds(tmp_path: Path) -> None:
    seen: list[Path] = []
    walls = iter([(1.0, 0), (1.0, 0), (90.0, 0), (140.0, 0), (100.0, 0), (110.0, 0)])

    def run(argv: Sequence[str], cwd: Path, log: Path) -> tuple[float, int]:
        seen.append(cwd)
        log.write_text("")
        return next(walls)

    old, new = tmp_path / "old", tmp_path / "new"
    found = compare_test_wall(old, "main", TestWall(rounds=1, warmup=True), here=new, run=run)
    # The new tree's first run built its agents (140 s): a warm-up, not a timed round.
    assert [(b["tree"], b.get("what"), b["wall_s"]) for b in found["builds"][2:]] == [
        ("main", "warm-up", 90.0), ("this tree", "warm-up", 140.0)
    ]  # fmt: skip
    assert (found["against_median_s"], found["this_median_s"]) == (100.0, 110.0)
    assert ("invoke test, warm-up, this tree, before timing", "140.0", "", "") in format_rows(found)
